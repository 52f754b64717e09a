// Host side of the chain verifier kernels (gpu/verify_chain.cuh): shape checks and the launch.
#include <limits>
#include <string>

#include "core/error.hpp"
#include "gpu/verify_chain.cuh"

namespace speclab::gpu {
namespace detail {
namespace {

void check_size(const char* argument, size_t actual, int64_t expected, const std::string& formula) {
  if (static_cast<int64_t>(actual) != expected) {
    throw InvalidInput(std::string(argument) + " has " + std::to_string(actual) +
                       " values; expected " + formula + " = " + std::to_string(expected));
  }
}

}  // namespace

void check_chain_launch(const ChainBatch& batch, const ChainParams& params,
                        const ChainDeviceOutput& output) {
  if (batch.batch < 1 || batch.batch > std::numeric_limits<int32_t>::max()) {
    throw InvalidInput("batch size B is " + std::to_string(batch.batch) +
                       "; expected 1 ≤ B < 2^31 (one CTA per request)");
  }
  if (batch.gamma < 0) {
    throw InvalidInput("gamma is " + std::to_string(batch.gamma) + "; expected γ ≥ 0");
  }
  if (batch.vocab < 1 || batch.vocab > std::numeric_limits<int32_t>::max()) {
    throw InvalidInput("vocab size V is " + std::to_string(batch.vocab) +
                       "; expected 1 ≤ V < 2^31 (token ids are int32)");
  }
  const int64_t b = batch.batch, g = batch.gamma, v = batch.vocab;
  const std::string bgv =
      " with B=" + std::to_string(b) + ", γ=" + std::to_string(g) + ", V=" + std::to_string(v);
  check_size("probs_target", batch.probs_target.size(), b * (g + 1) * v, "B·(γ+1)·V" + bgv);
  if (!(params.method == ChainMethod::kGreedy && batch.probs_draft.empty())) {
    check_size("probs_draft", batch.probs_draft.size(), b * g * v, "B·γ·V" + bgv);
  }
  check_size("draft_tokens", batch.draft_tokens.size(), b * g, "B·γ" + bgv);
  if (!batch.n_draft.empty()) check_size("n_draft", batch.n_draft.size(), b, "B");
  if (!batch.request_ids.empty()) check_size("request_ids", batch.request_ids.size(), b, "B");
  if (params.method == ChainMethod::kLenient && !(params.leniency > 0.0 && params.leniency <= 1.0 &&
                                                  static_cast<float>(params.leniency) > 0.0f)) {
    throw InvalidInput("leniency is " + std::to_string(params.leniency) +
                       "; expected 0 < leniency ≤ 1 (1 is lossless V1)");
  }
  check_size("emitted_tokens", output.emitted_tokens.size(), b * (g + 1), "B·(γ+1)" + bgv);
  check_size("n_accepted", output.n_accepted.size(), b, "B");
  check_size("accept_mask", output.accept_mask.size(), b * g, "B·γ" + bgv);
  check_size("residual_fallback", output.residual_fallback.size(), b, "B");
  check_size("status", output.status.size(), b, "B");
}

}  // namespace detail

cudaError_t verify_chain(const ChainBatch& batch, const ChainParams& params,
                         const ChainDeviceOutput& output, cudaStream_t stream) {
  return detail::launch_verify_chain<KernelMutant::kNone>(batch, params, output, stream);
}

}  // namespace speclab::gpu
