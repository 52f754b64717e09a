// Logits-to-probabilities kernel (header gpu/sampling/logits.hpp), one CTA per row: the checks and
// block argmax, core's block-ordered normaliser (block_normaliser), the rescale. Algorithm and
// bytes: gpu/README.md "gpu::probs_from_logits"; bitwise core's by proofs/gpu_kernels.md §2.
#pragma once

#include <cstdint>

#if !defined(SPECLAB_SIMT_EMULATION)
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#endif

#include "gpu/base/reduce.cuh"
#include "gpu/base/simt.cuh"
#include "gpu/sampling/logits.hpp"

namespace speclab::gpu::detail {

struct LogitsKernelArgs {
  const void* logits;  // [rows, V] in the kernel's format
  float* probs;        // [rows, V]
  uint32_t* status;    // [rows]
  int64_t vocab;
  float scale;  // float(1 / T), as core
  int greedy;   // T == 0
};

/// Threads that reduce one normaliser block together (one per float lane).
inline constexpr int kSumLanes = static_cast<int>(kNormaliserLanes);
/// Normaliser blocks a CTA of up to 1024 threads reduces at once.
inline constexpr int kMaxNormaliserGroups = 1024 / kSumLanes;

struct LogitsScratch {
  Argmax warp_best[kWarpSize];
  double block_totals[kMaxNormaliserGroups];
  float max;
  int32_t argmax;
  float scale;
};

/// The normaliser Σ e_t of one row in core's fixed block order (core/base/rules.hpp): groups of
/// 16 threads take the row's 2048-token blocks in turn, lane k adding exp_at(t) for the block's
/// t ≡ k (mod 16) in ascending order in float; each group adds its 16 lane sums in double in lane
/// order, and thread 0 adds the block totals in block order. `store(t, e)` sees every e_t once
/// (from the thread that computed it). Returns the total in thread 0 (other threads: unspecified).
/// `block_totals` is kMaxNormaliserGroups doubles of shared memory; the whole block must call.
template <class Exp, class Store>
__device__ double block_normaliser(const Exp& exp_at, const Store& store, int64_t vocab,
                                   double* block_totals) {
  const int lane = static_cast<int>(threadIdx.x) % kSumLanes;
  const int group = static_cast<int>(threadIdx.x) / kSumLanes;
  const int n_groups = static_cast<int>(blockDim.x) / kSumLanes;
  const int64_t n_blocks = (vocab + kNormaliserBlockTokens - 1) / kNormaliserBlockTokens;
  double total = 0.0;
  for (int64_t first = 0; first < n_blocks; first += n_groups) {
    const int64_t b = first + group;
    float sum = 0.0f;
    if (b < n_blocks) {
      const int64_t base = b * kNormaliserBlockTokens;
      const int64_t end =
          base + kNormaliserBlockTokens < vocab ? base + kNormaliserBlockTokens : vocab;
      for (int64_t t = base + lane; t < end; t += kSumLanes) {
        const float e = exp_at(t);
        store(t, e);
        sum += e;
      }
    }
    double block = 0.0;  // every lane forms it; the whole warp shuffles (segments of 16)
    for (int k = 0; k < kSumLanes; ++k) {
      block += static_cast<double>(__shfl_sync(kFullMask, sum, k, kSumLanes));
    }
    if (b < n_blocks && lane == 0) block_totals[group] = block;
    __syncthreads();
    if (threadIdx.x == 0) {
      const int64_t count = n_blocks - first < n_groups ? n_blocks - first : n_groups;
      for (int64_t g = 0; g < count; ++g) total += block_totals[g];
    }
    __syncthreads();  // block_totals is rewritten next round
  }
  return total;
}

template <LogitsFormat kFormat>
__device__ inline float load_logit(const void* logits, int64_t i) {
  if constexpr (kFormat == LogitsFormat::kFloat32) {
    return static_cast<const float*>(logits)[i];
  } else {
    const uint16_t bits = static_cast<const uint16_t*>(logits)[i];
#if !defined(SPECLAB_SIMT_EMULATION)
    if constexpr (kFormat == LogitsFormat::kFloat16) {
      return __half2float(__ushort_as_half(bits));
    } else {
      return __bfloat162float(__ushort_as_bfloat16(bits));
    }
#else
    if constexpr (kFormat == LogitsFormat::kFloat16) {
      return half_bits_to_float(bits);
    } else {
      return bfloat16_bits_to_float(bits);
    }
#endif
  }
}

template <LogitsFormat kFormat>
__global__ void __launch_bounds__(1024) logits_kernel(LogitsKernelArgs a) {
  SPECLAB_DYNAMIC_SHARED(uint64_t, shared);
  LogitsScratch* scratch = reinterpret_cast<LogitsScratch*>(shared);
  const int64_t v = a.vocab;
  const int64_t row = blockIdx.x;
  const void* logits =
      kFormat == LogitsFormat::kFloat32
          ? static_cast<const void*>(static_cast<const float*>(a.logits) + row * v)
          : static_cast<const void*>(static_cast<const uint16_t*>(a.logits) + row * v);
  float* out = a.probs + row * v;
  const float infinity = float_from_bits(0x7f800000u);

  // 1. Checks and argmax (lowest id on ties).
  Argmax best{-infinity, 0x7fffffff};
  int bad = 0, finite = 0;
  for (int64_t t = threadIdx.x; t < v; t += blockDim.x) {
    const float x = load_logit<kFormat>(logits, t);
    bad |= !(x < infinity);
    finite |= x > -infinity;
    if (x > best.value) best = {x, static_cast<int32_t>(t)};  // ascending t: the first stays
  }
  best = block_best(best, Argmax{-infinity, 0x7fffffff}, scratch->warp_best);
  if (threadIdx.x == 0) {
    scratch->max = best.value;
    scratch->argmax = best.index;
  }
  bad = __syncthreads_or(bad);
  finite = __syncthreads_or(finite);
  const uint32_t status = bad != 0 ? kLogitsBadValue : finite == 0 ? kLogitsAllMasked : kLogitsOk;
  if (threadIdx.x == 0) a.status[row] = status;
  if (status != kLogitsOk || a.greedy != 0) {  // block-uniform
    const int32_t argmax = scratch->argmax;
    for (int64_t t = threadIdx.x; t < v; t += blockDim.x) {
      out[t] = status == kLogitsOk && t == argmax ? 1.0f : 0.0f;
    }
    return;
  }

  // 2. The tempered exponentials, core's float operations, and the normaliser in core's order.
  const float shift = scratch->max;
  const double total = block_normaliser(
      [&](int64_t t) {
        return exp_nonpositive((load_logit<kFormat>(logits, t) - shift) * a.scale);
      },
      [&](int64_t t, float e) { out[t] = e; }, v, scratch->block_totals);
  if (threadIdx.x == 0) scratch->scale = static_cast<float>(1.0 / total);
  __syncthreads();

  // 3. Normalise: each thread rescales the entries it wrote (block_normaliser's assignment).
  const float scale = scratch->scale;
  const int sum_lane = static_cast<int>(threadIdx.x) % kSumLanes;
  const int group = static_cast<int>(threadIdx.x) / kSumLanes;
  const int n_groups = static_cast<int>(blockDim.x) / kSumLanes;
  for (int64_t base = group * kNormaliserBlockTokens; base < v;
       base += static_cast<int64_t>(n_groups) * kNormaliserBlockTokens) {
    const int64_t end = base + kNormaliserBlockTokens < v ? base + kNormaliserBlockTokens : v;
    for (int64_t t = base + sum_lane; t < end; t += kSumLanes) out[t] *= scale;
  }
}

}  // namespace speclab::gpu::detail
