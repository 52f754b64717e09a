// Runs gpu::verify_chain (or a mutant) on a host-owned ChainBatch through device buffers and
// compares it with core, token for token (docs/testing.md "CPU reference vs GPU").
#pragma once

#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstdint>
#include <functional>
#include <random>
#include <span>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "core/verify/verify_chain.hpp"
#include "gpu/base/cuda_check.hpp"
#include "gpu/verify/verify_chain.hpp"
#include "tests/support/chain_fixture.hpp"

namespace speclab::testing {

/// A device copy of a host vector; `pad` extra elements keep an overrun inside the allocation.
template <typename T>
class DeviceBuffer {
 public:
  explicit DeviceBuffer(const std::vector<T>& host, size_t pad = 0) : size_(host.size()) {
    if (size_ == 0) return;
    SPECLAB_CUDA_CHECK(cudaMalloc(reinterpret_cast<void**>(&data_), (size_ + pad) * sizeof(T)));
    SPECLAB_CUDA_CHECK(cudaMemcpy(data_, host.data(), size_ * sizeof(T), cudaMemcpyHostToDevice));
    if (pad > 0) SPECLAB_CUDA_CHECK(cudaMemset(data_ + size_, 0, pad * sizeof(T)));
  }
  explicit DeviceBuffer(size_t n) : size_(n) {
    if (n > 0) SPECLAB_CUDA_CHECK(cudaMalloc(reinterpret_cast<void**>(&data_), n * sizeof(T)));
  }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  ~DeviceBuffer() { cudaFree(data_); }

  std::span<T> span() { return {data_, size_}; }
  std::span<const T> const_span() const { return {data_, size_}; }
  cudaError_t copy_to(std::vector<T>& host) const {
    host.resize(size_);
    return size_ == 0 ? cudaSuccess
                      : cudaMemcpy(host.data(), data_, size_ * sizeof(T), cudaMemcpyDeviceToHost);
  }

 private:
  T* data_ = nullptr;
  size_t size_ = 0;
};

using ChainLauncher = std::function<cudaError_t(const ChainBatch&, const ChainParams&,
                                                const gpu::ChainDeviceOutput&, cudaStream_t)>;

struct GpuChainResult {
  cudaError_t launch = cudaSuccess;  ///< what the launcher returned
  cudaError_t sync = cudaSuccess;    ///< the first error of the synchronising copies
  std::vector<int32_t> emitted_tokens, n_accepted;
  std::vector<uint8_t> accept_mask, residual_fallback;
  std::vector<uint32_t> status;
};

/// gpu::verify_chain on probability rows (the overload the default launcher names).
inline cudaError_t verify_chain_probs(const ChainBatch& batch, const ChainParams& params,
                                      const gpu::ChainDeviceOutput& output, cudaStream_t stream) {
  return gpu::verify_chain(batch, params, output, stream);
}

/// `launch(output with a workspace)` made twice on one zeroed ChainWorkspace of `bytes` split into
/// `slices`, with the outputs and everything in the workspace past the arrival counters
/// overwritten in between: the second launch must find the counters reset by the first, write
/// every output again and read no workspace data it has not written. Returns the first error, or
/// cudaErrorIllegalState when a launch left an arrival counter (the workspace's first `batch`
/// words) nonzero.
inline cudaError_t launch_twice_on_workspace(
    size_t bytes, int slices, int64_t batch, const gpu::ChainDeviceOutput& output,
    cudaStream_t stream, const std::function<cudaError_t(const gpu::ChainDeviceOutput&)>& launch) {
  DeviceBuffer<std::byte> workspace{std::vector<std::byte>(bytes)};
  gpu::ChainDeviceOutput split = output;
  split.workspace = {workspace.span(), slices};
  if (const cudaError_t e = launch(split); e != cudaSuccess) return e;
  for (const auto& [data, size] :
       {std::pair<void*, size_t>{output.emitted_tokens.data(), output.emitted_tokens.size_bytes()},
        {output.n_accepted.data(), output.n_accepted.size_bytes()},
        {output.accept_mask.data(), output.accept_mask.size_bytes()},
        {output.status.data(), output.status.size_bytes()}}) {
    if (size > 0) SPECLAB_CUDA_CHECK(cudaMemsetAsync(data, 0x5a, size, stream));
  }
  // Past the counters the workspace holds nothing a launch may read before writing it.
  const size_t counters = static_cast<size_t>(batch) * sizeof(uint32_t);
  if (bytes > counters) {
    SPECLAB_CUDA_CHECK(
        cudaMemsetAsync(workspace.span().data() + counters, 0x5a, bytes - counters, stream));
  }
  const cudaError_t e = launch(split);
  const cudaError_t sync = cudaStreamSynchronize(stream);  // before the workspace is freed
  if (e != cudaSuccess || sync != cudaSuccess) return e != cudaSuccess ? e : sync;
  std::vector<uint32_t> arrivals(static_cast<size_t>(batch));
  SPECLAB_CUDA_CHECK(cudaMemcpy(arrivals.data(), workspace.span().data(),
                                arrivals.size() * sizeof(uint32_t), cudaMemcpyDeviceToHost));
  const bool zeroed =
      std::all_of(arrivals.begin(), arrivals.end(), [](uint32_t a) { return a == 0; });
  return zeroed ? cudaSuccess : cudaErrorIllegalState;
}

/// One request of a batch as a batch of its own, γ still padded to the batch's (same request id,
/// so the same uniforms).
inline OwnedChainBatch padded_single_request(const OwnedChainBatch& batch, int64_t r) {
  OwnedChainBatch one(1, batch.gamma, batch.vocab);
  const int64_t g = batch.gamma, v = batch.vocab;
  std::copy_n(&batch.probs_target[r * (g + 1) * v], (g + 1) * v, one.probs_target.begin());
  std::copy_n(&batch.probs_draft[r * g * v], g * v, one.probs_draft.begin());
  std::copy_n(&batch.draft_tokens[r * g], g, one.draft_tokens.begin());
  if (!batch.n_draft.empty()) one.n_draft = {batch.n_draft[r]};
  one.request_ids = {batch.request_ids.empty() ? static_cast<uint32_t>(r) : batch.request_ids[r]};
  return one;
}

/// Copies `host` to the device, launches, copies the outputs back.
inline GpuChainResult run_gpu_chain(const OwnedChainBatch& host, const ChainParams& params,
                                    const ChainLauncher& launcher = verify_chain_probs,
                                    size_t pad = 0) {
  DeviceBuffer<float> target(host.probs_target, pad), draft(host.probs_draft, pad);
  DeviceBuffer<int32_t> tokens(host.draft_tokens), n_draft(host.n_draft);
  DeviceBuffer<uint32_t> request_ids(host.request_ids);
  const size_t b = host.batch, g = host.gamma;
  DeviceBuffer<int32_t> emitted(b * (g + 1)), n_accepted(b);
  DeviceBuffer<uint8_t> mask(b * g), fallback(b);
  DeviceBuffer<uint32_t> status(b);
  const ChainBatch batch{
      host.batch,         host.gamma,          host.vocab,           target.const_span(),
      draft.const_span(), tokens.const_span(), n_draft.const_span(), request_ids.const_span()};
  GpuChainResult out;
  out.launch = launcher(
      batch, params,
      {emitted.span(), n_accepted.span(), mask.span(), fallback.span(), status.span()}, nullptr);
  for (const cudaError_t e :
       {emitted.copy_to(out.emitted_tokens), n_accepted.copy_to(out.n_accepted),
        mask.copy_to(out.accept_mask), fallback.copy_to(out.residual_fallback),
        status.copy_to(out.status)}) {
    if (out.sync == cudaSuccess) out.sync = e;
  }
  return out;
}

/// "" when the device result equals core's for every request, else the first differences.
inline std::string differences(const GpuChainResult& gpu, const ChainResult& ref) {
  std::ostringstream out;
  if (gpu.launch != cudaSuccess || gpu.sync != cudaSuccess) {
    out << "launch " << cudaGetErrorName(gpu.launch) << ", sync " << cudaGetErrorName(gpu.sync);
    return out.str();
  }
  int reported = 0;
  const int64_t g = ref.gamma;
  for (int64_t r = 0; r < ref.batch && reported < 5; ++r) {
    bool same = gpu.status[r] == 0 && gpu.n_accepted[r] == ref.n_accepted[r] &&
                gpu.residual_fallback[r] == ref.residual_fallback[r];
    for (int64_t i = 0; i <= g; ++i) {
      same &= gpu.emitted_tokens[r * (g + 1) + i] == ref.emitted_tokens[r * (g + 1) + i];
    }
    for (int64_t i = 0; i < g; ++i)
      same &= gpu.accept_mask[r * g + i] == ref.accept_mask[r * g + i];
    if (same) continue;
    ++reported;
    out << "request " << r << ": status " << gpu.status[r] << ", n_accepted gpu "
        << gpu.n_accepted[r] << " core " << ref.n_accepted[r] << ", fallback gpu "
        << int{gpu.residual_fallback[r]} << " core " << int{ref.residual_fallback[r]}
        << ", emitted gpu/core:";
    for (int64_t i = 0; i <= g; ++i) {
      out << ' ' << gpu.emitted_tokens[r * (g + 1) + i] << '/'
          << ref.emitted_tokens[r * (g + 1) + i];
    }
    out << '\n';
  }
  return out.str();
}

/// How a random probability row looks.
enum class RowKind { kDense, kSparse, kOneHot, kPeaked };

/// A random probability row from integer weights (exactly representable ratios up to rounding).
inline void random_row(std::mt19937_64& rng, float* row, int64_t vocab, RowKind kind) {
  std::vector<int> weights(vocab, 0);
  std::uniform_int_distribution<int64_t> token(0, vocab - 1);
  switch (kind) {
    case RowKind::kDense: {
      std::uniform_int_distribution<int> w(0, 1000);
      for (auto& x : weights) x = w(rng);
      break;
    }
    case RowKind::kSparse: {
      std::uniform_int_distribution<int> w(1, 1000);
      const int64_t k = 1 + token(rng) % 8;
      for (int64_t j = 0; j < k; ++j) weights[token(rng)] = w(rng);
      break;
    }
    case RowKind::kOneHot:
      weights[token(rng)] = 1;
      break;
    case RowKind::kPeaked: {
      std::uniform_int_distribution<int> w(0, 3);
      for (auto& x : weights) x = w(rng);
      weights[token(rng)] += 100000;
      break;
    }
  }
  bool any = false;
  for (int x : weights) any |= x > 0;
  if (!any) weights[token(rng)] = 1;
  fill_row(row, weights);
}

/// A random batch: every row of the given kinds (chosen at random per row), drafts drawn from q.
inline OwnedChainBatch random_batch(uint64_t seed, int64_t b, int64_t g, int64_t v,
                                    const std::vector<RowKind>& kinds, bool draft_is_target,
                                    bool ragged) {
  std::mt19937_64 rng(seed);
  OwnedChainBatch batch(b, g, v);
  std::uniform_int_distribution<size_t> pick(0, kinds.size() - 1);
  for (int64_t r = 0; r < b; ++r) {
    for (int64_t i = 0; i <= g; ++i) random_row(rng, batch.target_row(r, i), v, kinds[pick(rng)]);
    for (int64_t i = 0; i < g; ++i) {
      if (draft_is_target) {
        std::copy(batch.target_row(r, i), batch.target_row(r, i) + v, batch.draft_row(r, i));
      } else {
        random_row(rng, batch.draft_row(r, i), v, kinds[pick(rng)]);
      }
    }
  }
  batch.draw_drafts(seed ^ 0x5eedu);
  if (ragged) {
    std::uniform_int_distribution<int32_t> n(0, static_cast<int32_t>(g));
    batch.n_draft.resize(b);
    for (auto& x : batch.n_draft) x = n(rng);
    batch.request_ids.resize(b);
    for (int64_t r = 0; r < b; ++r) batch.request_ids[r] = static_cast<uint32_t>(1000 + 7 * r);
  }
  return batch;
}

}  // namespace speclab::testing
