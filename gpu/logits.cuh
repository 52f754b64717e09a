// Logits-to-probabilities kernel (header gpu/logits.hpp), one CTA per row:
//  1. one pass over the logits (converted to float): NaN/+inf and all -inf checks, and a block
//     argmax (largest value, lowest id on ties; the max is order-free, so it is core's max_of);
//  2. T = 0: the one-hot argmax. T > 0: e_t = exp_nonpositive((l_t − max)·scale) for every t,
//     written to the output row (a second read of the logits);
//  3. after a barrier (global writes are visible to the block), threads 0..15 form core's 16
//     float lane sums, each a serial sum over t ≡ k (mod 16), t < 16·⌊V/16⌋; thread 0 adds them in
//     double in lane order, then the tail, and forms scale = float(1/total) — core's exact order,
//     so the normaliser, and every probability e_t·scale, is bitwise core's;
//  4. every thread rescales its own entries.
// Bytes per row: the logits twice (2·4V fp32, 2·2V fp16/bf16), 4V written, 4V read back by the
// lane sums (mostly L1/L2), 4V read and written by the rescale. The lane sums are ~V/16 dependent
// float adds per thread: the price of bitwise equality with core's vectorised order.
#pragma once

#include <cstdint>

#if !defined(SPECLAB_SIMT_EMULATION)
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#endif

#include "gpu/logits.hpp"
#include "gpu/simt.cuh"
#include "gpu/verify_chain.cuh"

namespace speclab::gpu::detail {

inline constexpr int kSumLanes = 16;  // core/sampling/sampling.cpp's FloatLanes width

struct LogitsKernelArgs {
  const void* logits;  // [rows, V] in the kernel's format
  float* probs;        // [rows, V]
  uint32_t* status;    // [rows]
  int64_t vocab;
  float scale;  // float(1 / T), as core
  int greedy;   // T == 0
};

struct LogitsScratch {
  float warp_best_value[kWarpSize];
  int32_t warp_best_index[kWarpSize];
  float lane_sums[kSumLanes];
  float max;
  int32_t argmax;
  float scale;
};

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
  const int lane = static_cast<int>(threadIdx.x) % kWarpSize;
  const int warp = static_cast<int>(threadIdx.x) / kWarpSize;
  const int n_warps = static_cast<int>(blockDim.x) / kWarpSize;
  const float infinity = float_from_bits(0x7f800000u);

  // 1. Checks and argmax (lowest id on ties).
  float best = -infinity;
  int32_t best_index = 0x7fffffff;
  int bad = 0, finite = 0;
  for (int64_t t = threadIdx.x; t < v; t += blockDim.x) {
    const float x = load_logit<kFormat>(logits, t);
    bad |= !(x < infinity);
    finite |= x > -infinity;
    if (x > best) {  // ascending t: the first of equal values stays
      best = x;
      best_index = static_cast<int32_t>(t);
    }
  }
  for (int offset = kWarpSize / 2; offset > 0; offset >>= 1) {
    const float other = __shfl_xor_sync(kFullMask, best, offset);
    const int32_t other_index = __shfl_xor_sync(kFullMask, best_index, offset);
    take_better(&best, &best_index, other, other_index);
  }
  if (lane == 0) {
    scratch->warp_best_value[warp] = best;
    scratch->warp_best_index[warp] = best_index;
  }
  __syncthreads();
  if (warp == 0) {
    float value = lane < n_warps ? scratch->warp_best_value[lane] : -infinity;
    int32_t index = lane < n_warps ? scratch->warp_best_index[lane] : 0x7fffffff;
    for (int offset = kWarpSize / 2; offset > 0; offset >>= 1) {
      const float other = __shfl_xor_sync(kFullMask, value, offset);
      const int32_t other_index = __shfl_xor_sync(kFullMask, index, offset);
      take_better(&value, &index, other, other_index);
    }
    if (lane == 0) {
      scratch->max = value;
      scratch->argmax = index;
    }
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

  // 2. The tempered exponentials, core's float operations.
  const float shift = scratch->max;
  for (int64_t t = threadIdx.x; t < v; t += blockDim.x) {
    out[t] = exp_nonpositive((load_logit<kFormat>(logits, t) - shift) * a.scale);
  }
  __syncthreads();

  // 3. core's normaliser: 16 float lane sums, then double in lane order, then the tail.
  const int64_t full = v / kSumLanes * kSumLanes;
  if (threadIdx.x < kSumLanes) {
    float sum = 0.0f;
    for (int64_t t = threadIdx.x; t < full; t += kSumLanes) sum += out[t];
    scratch->lane_sums[threadIdx.x] = sum;
  }
  __syncthreads();
  if (threadIdx.x == 0) {
    double total = 0.0;
    for (int k = 0; k < kSumLanes; ++k) total += scratch->lane_sums[k];
    for (int64_t t = full; t < v; ++t) total += out[t];
    scratch->scale = static_cast<float>(1.0 / total);
  }
  __syncthreads();

  // 4. Normalise: each thread rescales the entries it wrote.
  const float scale = scratch->scale;
  for (int64_t t = threadIdx.x; t < v; t += blockDim.x) out[t] *= scale;
}

}  // namespace speclab::gpu::detail
