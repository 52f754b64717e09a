// Host side of the logits kernel (gpu/sampling/logits.cuh): checks and the launch.
#include <cmath>
#include <limits>
#include <string>

#include "core/base/error.hpp"
#include "gpu/sampling/logits.cuh"

namespace speclab::gpu {

void check_logits_span(std::string_view what, LogitsFormat format,
                       std::span<const std::byte> logits, int64_t elements,
                       std::string_view formula) {
  const int64_t element = logit_bytes(format);
  if (static_cast<int64_t>(logits.size()) != elements * element) {
    throw InvalidInput(std::string(what) + " have " + std::to_string(logits.size()) +
                       " bytes; expected " + std::string(formula) + " logits of " +
                       std::to_string(element) + " bytes = " + std::to_string(elements * element));
  }
  const auto address = reinterpret_cast<uintptr_t>(logits.data());
  if (address % static_cast<uintptr_t>(element) != 0) {
    throw InvalidInput(std::string(what) + " start at byte address " + std::to_string(address) +
                       ", not a multiple of " + std::to_string(element) +
                       " (the size of one logit): the kernels read whole logits");
  }
}

cudaError_t probs_from_logits(LogitsFormat format, std::span<const std::byte> logits, int64_t rows,
                              int64_t vocab, double temperature, std::span<float> probs,
                              std::span<uint32_t> status, cudaStream_t stream) {
  if (rows < 1 || rows > std::numeric_limits<int32_t>::max()) {
    throw InvalidInput("rows is " + std::to_string(rows) +
                       "; expected 1 ≤ rows < 2^31 (one CTA per row)");
  }
  if (vocab < 1 || vocab > std::numeric_limits<int32_t>::max()) {
    throw InvalidInput("vocab size V is " + std::to_string(vocab) +
                       "; expected 1 ≤ V < 2^31 (token ids are int32)");
  }
  if (!std::isfinite(temperature) || temperature < 0.0) {
    throw InvalidInput("temperature is " + std::to_string(temperature) +
                       "; expected a finite value ≥ 0");
  }
  check_logits_span("logits", format, logits, rows * vocab,
                    "rows·V = " + std::to_string(rows * vocab));
  if (static_cast<int64_t>(probs.size()) != rows * vocab) {
    throw InvalidInput("probs has " + std::to_string(probs.size()) +
                       " values; expected rows·V = " + std::to_string(rows * vocab));
  }
  if (static_cast<int64_t>(status.size()) != rows) {
    throw InvalidInput("status has " + std::to_string(status.size()) +
                       " values; expected rows = " + std::to_string(rows));
  }
  detail::LogitsKernelArgs args{};
  args.logits = logits.data();
  args.probs = probs.data();
  args.status = status.data();
  args.vocab = vocab;
  args.greedy = temperature == 0.0 ? 1 : 0;
  args.scale = temperature == 0.0 ? 0.0f : static_cast<float>(1.0 / temperature);
  const dim3 grid(static_cast<unsigned>(rows));
  const dim3 block(static_cast<unsigned>(detail::row_block_threads(vocab)));
  const size_t shared_bytes = sizeof(detail::LogitsScratch);
  switch (format) {
    case LogitsFormat::kFloat16:
      return launch_kernel(detail::logits_kernel<LogitsFormat::kFloat16>, grid, block, shared_bytes,
                           stream, args);
    case LogitsFormat::kBFloat16:
      return launch_kernel(detail::logits_kernel<LogitsFormat::kBFloat16>, grid, block,
                           shared_bytes, stream, args);
    case LogitsFormat::kFloat32:
      break;
  }
  return launch_kernel(detail::logits_kernel<LogitsFormat::kFloat32>, grid, block, shared_bytes,
                       stream, args);
}

}  // namespace speclab::gpu
