// Host side of the chain verifier kernels (gpu/verify/verify_chain.cuh): shape checks and the
// launch.
#include <algorithm>
#include <cmath>
#include <limits>
#include <string>

#include "core/base/error.hpp"
#include "gpu/sampling/fused_logits.cuh"
#include "gpu/verify/row_stats.cuh"
#include "gpu/verify/verify_chain.cuh"
#include "gpu/verify/verify_chain_logits.cuh"

namespace speclab::gpu {
namespace detail {
namespace {

void check_size(const char* argument, size_t actual, int64_t expected, const std::string& formula) {
  if (static_cast<int64_t>(actual) != expected) {
    throw InvalidInput(std::string(argument) + " has " + std::to_string(actual) +
                       " values; expected " + formula + " = " + std::to_string(expected));
  }
}

// The device's own limits on top of core's checks: one CTA per request, int32 token ids.
void check_device_limits(int64_t batch, int64_t vocab) {
  if (batch > std::numeric_limits<int32_t>::max()) {
    throw InvalidInput("batch size B is " + std::to_string(batch) +
                       "; expected 1 ≤ B < 2^31 (one CTA per request)");
  }
  if (vocab > std::numeric_limits<int32_t>::max()) {
    throw InvalidInput("vocab size V is " + std::to_string(vocab) +
                       "; expected 1 ≤ V < 2^31 (token ids are int32)");
  }
}

void check_outputs(const ChainDeviceOutput& output, int64_t b, int64_t g, const std::string& bgv) {
  check_size("emitted_tokens", output.emitted_tokens.size(), b * (g + 1), "B·(γ+1)" + bgv);
  check_size("n_accepted", output.n_accepted.size(), b, "B");
  check_size("accept_mask", output.accept_mask.size(), b * g, "B·γ" + bgv);
  check_size("residual_fallback", output.residual_fallback.size(), b, "B");
  check_size("status", output.status.size(), b, "B");
}

// One model's logits: the byte count for its format, and a temperature core accepts whose
// float(1/T) is finite (below about 2.9e-39 it is not, and core's probabilities would be NaN).
void check_logits(const char* model, const DeviceLogits& logits, int64_t elements,
                  const std::string& formula) {
  check_logits_span(std::string(model) + " logits", logits.format, logits.data, elements,
                    formula + " = " + std::to_string(elements));
  const double t = logits.temperature;
  if (!std::isfinite(t) || t < 0.0 || (t > 0.0 && !std::isfinite(static_cast<float>(1.0 / t)))) {
    throw InvalidInput(std::string(model) + " temperature is " + std::to_string(t) +
                       "; expected a finite value ≥ 0 whose float(1/T) is finite (0 = greedy)");
  }
}

}  // namespace

void check_chain_launch(const ChainBatch& batch, const ChainParams& params,
                        const ChainDeviceOutput& output) {
  validate_chain_sizes(batch, params);  // core's checks, which read no element
  check_device_limits(batch.batch, batch.vocab);
  const int64_t b = batch.batch, g = batch.gamma, v = batch.vocab;
  check_outputs(
      output, b, g,
      " with B=" + std::to_string(b) + ", γ=" + std::to_string(g) + ", V=" + std::to_string(v));
}

void check_logits_launch(const LogitsBatch& batch, bool needs_draft,
                         const ChainDeviceOutput& output) {
  // The probability arrays are absent: the logits are checked below, by format.
  validate_chain_index_sizes(ChainBatch{.batch = batch.batch,
                                        .gamma = batch.gamma,
                                        .vocab = batch.vocab,
                                        .probs_target = {},
                                        .probs_draft = {},
                                        .draft_tokens = batch.draft_tokens,
                                        .n_draft = batch.n_draft,
                                        .request_ids = batch.request_ids});
  check_device_limits(batch.batch, batch.vocab);
  const int64_t b = batch.batch, g = batch.gamma, v = batch.vocab;
  const std::string bgv =
      " with B=" + std::to_string(b) + ", γ=" + std::to_string(g) + ", V=" + std::to_string(v);
  check_logits("target", batch.target, b * (g + 1) * v, "B·(γ+1)·V" + bgv);
  if (needs_draft || !batch.draft.data.empty()) {
    check_logits("draft", batch.draft, b * g * v, "B·γ·V" + bgv);
  }
  check_outputs(output, b, g, bgv);
}

namespace {

void check_workspace_bytes(const ChainWorkspace& workspace, int64_t batch, int64_t gamma,
                           int64_t vocab) {
  // Its arrays hold 8- and 16-byte values (chunk sums, SlicePartial), laid out from the start.
  const auto address = reinterpret_cast<uintptr_t>(workspace.bytes.data());
  if (address % 16 != 0) {
    throw InvalidInput("workspace starts at byte address " + std::to_string(address) +
                       ", not a multiple of 16: its arrays need 16-byte alignment (cudaMalloc's "
                       "pointers have 256)");
  }
  const size_t needed = chain_workspace_bytes(batch, gamma, vocab);
  if (workspace.bytes.size() < needed) {
    throw InvalidInput("workspace has " + std::to_string(workspace.bytes.size()) +
                       " bytes; expected at least chain_workspace_bytes(B=" +
                       std::to_string(batch) + ", γ=" + std::to_string(gamma) +
                       ", V=" + std::to_string(vocab) + ") = " + std::to_string(needed));
  }
}

void check_requested_slices(const ChainWorkspace& workspace) {
  if (workspace.slices < 0) {
    throw InvalidInput("workspace.slices is " + std::to_string(workspace.slices) +
                       "; expected 0 (automatic), 1 (no split) or more");
  }
}

}  // namespace

SplitArgs split_args(const ChainWorkspace& workspace, int64_t batch, int64_t gamma, int64_t vocab,
                     int slices) {
  const int64_t n_chunks = (vocab + kChunkTokens - 1) / kChunkTokens;
  const SplitLayout layout = split_layout(batch, gamma, chain_max_slices(vocab), n_chunks);
  std::byte* base = workspace.bytes.data();
  SplitArgs split{};
  split.arrivals = reinterpret_cast<uint32_t*>(base);
  split.partials = reinterpret_cast<SlicePartial*>(base + layout.partials);
  split.chunk_sums = reinterpret_cast<uint64_t*>(base + layout.chunk_sums);
  split.rows = reinterpret_cast<RowArgmax*>(base + layout.rows);
  split.row_stats = reinterpret_cast<unsigned char*>(base + layout.row_stats);
  split.slices = slices;
  split.slice_chunks = (n_chunks + slices - 1) / slices;
  return split;
}

int vocab_split_slices(int64_t batch, int64_t gamma, int64_t vocab, const ChainWorkspace& workspace,
                       int multiprocessors) {
  check_requested_slices(workspace);
  check_workspace_bytes(workspace, batch, gamma, vocab);
  const int max_slices = chain_max_slices(vocab);
  if (workspace.slices > 1 && workspace.slices > max_slices) {
    throw InvalidInput("workspace.slices is " + std::to_string(workspace.slices) +
                       "; expected 0 (automatic), 1 (no split) or 2.." +
                       std::to_string(max_slices) + " for V=" + std::to_string(vocab));
  }
  int slices = workspace.slices;
  if (slices == 0) {
    const int64_t wanted = batch >= multiprocessors
                               ? 1
                               : (2 * static_cast<int64_t>(multiprocessors) + batch - 1) / batch;
    const int64_t n_chunks = (vocab + kChunkTokens - 1) / kChunkTokens;
    const int64_t largest = std::min<int64_t>(max_slices, n_chunks / kAutoSliceChunks);
    slices = static_cast<int>(std::max<int64_t>(1, std::min(wanted, largest)));
  }
  return slices < 1 ? 1 : slices;
}

bool rows_in_parallel(int64_t batch, int64_t gamma, int64_t vocab, const ChainWorkspace& workspace,
                      int multiprocessors) {
  check_requested_slices(workspace);
  check_workspace_bytes(workspace, batch, gamma, vocab);
  // Rows past the stop are read in vain; at B ≥ SMs they would cost bandwidth, so the one-CTA
  // kernel stays.
  const bool rows = workspace.slices >= 2 || (workspace.slices == 0 && batch < multiprocessors);
  return rows && gamma > 0;
}

int chain_launch_slices(const ChainBatch& batch, const ChainParams& params,
                        const ChainWorkspace& workspace, int multiprocessors) {
  if (params.method == ChainMethod::kGreedy) {
    return rows_in_parallel(batch.batch, batch.gamma, batch.vocab, workspace, multiprocessors)
               ? static_cast<int>(batch.gamma + 1)
               : 1;
  }
  return vocab_split_slices(batch.batch, batch.gamma, batch.vocab, workspace, multiprocessors);
}

int device_multiprocessors() {
#if defined(SPECLAB_SIMT_EMULATION)
  return 132;
#else
  int device = 0, count = 0;
  if (cudaGetDevice(&device) != cudaSuccess ||
      cudaDeviceGetAttribute(&count, cudaDevAttrMultiProcessorCount, device) != cudaSuccess) {
    return 1;  // not knowing the device, do not split
  }
  return count < 1 ? 1 : count;
#endif
}

}  // namespace detail

int chain_max_slices(int64_t vocab) {
  const int64_t n_chunks = (vocab + kChunkTokens - 1) / kChunkTokens;
  const int64_t slices = n_chunks / kMinSliceChunks;
  return static_cast<int>(slices < 1 ? 1 : slices > 4096 ? 4096 : slices);
}

size_t chain_workspace_bytes(int64_t batch, int64_t gamma, int64_t vocab) {
  const int64_t n_chunks = (vocab + kChunkTokens - 1) / kChunkTokens;
  return detail::split_layout(batch, gamma, chain_max_slices(vocab), n_chunks).bytes;
}

cudaError_t verify_chain(const ChainBatch& batch, const ChainParams& params,
                         const ChainDeviceOutput& output, cudaStream_t stream) {
  return detail::launch_verify_chain<KernelMutant::kNone>(batch, params, output, stream);
}

cudaError_t verify_chain(const ChainBatch& batch, const ChainParams& params,
                         const ChainDeviceOutput& output, cudaStream_t stream,
                         const DeviceSeedStep* seed_step) {
  return detail::launch_verify_chain<KernelMutant::kNone>(batch, params, output, stream, seed_step);
}

cudaError_t verify_chain(const LogitsBatch& batch, const ChainParams& params,
                         const ChainDeviceOutput& output, cudaStream_t stream,
                         const DeviceSeedStep* seed_step) {
  detail::check_logits_launch(batch, params.method != ChainMethod::kGreedy, output);
  validate_chain_params(params);
  detail::LogitsChainKernelArgs args{};
  detail::fill_request_args(args, batch, output);
  args.target = detail::logits_source(batch.target);
  args.draft = detail::logits_source(batch.draft);
  detail::set_chain_params(args, params, seed_step);
  const size_t shared_bytes = detail::chain_logits_shared_bytes(args.n_chunks);
  const bool greedy = params.method == ChainMethod::kGreedy;
  // V1/V3 with the sampled row split over slices (small batches): the rows' statistics first, then
  // the split kernel, on the same stream.
  const int slices =
      !greedy && !output.workspace.bytes.empty() && chain_max_slices(batch.vocab) > 1
          ? detail::vocab_split_slices(batch.batch, batch.gamma, batch.vocab, output.workspace,
                                       detail::device_multiprocessors())
          : 1;
  if (slices > 1) {
    for (auto* kernel :
         {detail::logits_rows_stats_kernel, detail::verify_chain_logits_split_kernel}) {
      if (shared_bytes > 48 * 1024) {
        const cudaError_t status = cudaFuncSetAttribute(
            kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(shared_bytes));
        if (status != cudaSuccess) return status;
      }
    }
    const detail::SplitArgs split =
        detail::split_args(output.workspace, batch.batch, batch.gamma, batch.vocab, slices);
    const int64_t row_ctas = batch.batch * detail::logits_rows_per_request(batch.gamma, false);
    const cudaError_t stats =
        launch_kernel(detail::logits_rows_stats_kernel, dim3(static_cast<unsigned>(row_ctas)),
                      dim3(static_cast<unsigned>(detail::row_block_threads(batch.vocab))),
                      shared_bytes, stream, args, split);
    if (stats != cudaSuccess) return stats;
    return launch_kernel(
        detail::verify_chain_logits_split_kernel, dim3(static_cast<unsigned>(batch.batch * slices)),
        dim3(static_cast<unsigned>(detail::split_block_threads(split.slice_chunks))), shared_bytes,
        stream, args, split);
  }
  const bool rows = !output.workspace.bytes.empty() &&
                    detail::rows_in_parallel(batch.batch, batch.gamma, batch.vocab,
                                             output.workspace, detail::device_multiprocessors());
  auto kernel =
      rows ? detail::verify_chain_logits_kernel<true> : detail::verify_chain_logits_kernel<false>;
  if (shared_bytes > 48 * 1024) {
    const cudaError_t status = cudaFuncSetAttribute(
        kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(shared_bytes));
    if (status != cudaSuccess) return status;
  }
  const detail::SplitArgs split =
      rows ? detail::split_args(output.workspace, batch.batch, batch.gamma, batch.vocab, 1)
           : detail::SplitArgs{};
  const int64_t ctas =
      batch.batch * (rows ? detail::logits_rows_per_request(batch.gamma, greedy) : 1);
  return launch_kernel(kernel, dim3(static_cast<unsigned>(ctas)),
                       dim3(static_cast<unsigned>(detail::row_block_threads(batch.vocab))),
                       shared_bytes, stream, args, split);
}

cudaError_t fused_logits_rows(const DeviceLogits& logits, int64_t rows, int64_t vocab,
                              std::span<float> probs, std::span<int32_t> greedy_tokens,
                              std::span<uint32_t> status, cudaStream_t stream) {
  if (rows < 1 || vocab < 1) {
    throw InvalidInput("rows is " + std::to_string(rows) + " and vocab size V is " +
                       std::to_string(vocab) + "; expected rows ≥ 1 and V ≥ 1");
  }
  detail::check_device_limits(rows, vocab);
  detail::check_logits("logits", logits, rows * vocab, "rows·V");
  detail::check_size("probs", probs.size(), rows * vocab, "rows·V");
  detail::check_size("greedy_tokens", greedy_tokens.size(), rows, "rows");
  detail::check_size("status", status.size(), rows, "rows");
  return launch_kernel(detail::fused_rows_kernel, dim3(static_cast<unsigned>(rows)),
                       dim3(static_cast<unsigned>(detail::row_block_threads(vocab))),
                       detail::logits_shared_bytes(), stream, detail::logits_source(logits), vocab,
                       probs.data(), greedy_tokens.data(), status.data());
}

}  // namespace speclab::gpu
