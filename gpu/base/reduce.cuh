// The block's reductions, one copy each, shared by the softmax, the row sampler and the
// verifiers: warp and block sums and scans of integers and doubles, and the block argmax in
// take_better's order. Integer sums are exact, so their result never depends on the order.
#pragma once

#include <cstdint>

#include "core/base/rules.hpp"
#include "gpu/base/device_types.hpp"
#include "gpu/base/simt.cuh"

namespace speclab::gpu::detail {

inline constexpr unsigned kFullMask = 0xffffffffu;
inline constexpr int kWarpSize = 32;
inline constexpr int kLaneTokens = 8;  // tokens per lane per chunk
// A warp's chunk is core's blocked-scan chunk (core/base/rules.hpp).
static_assert(kChunkTokens == kWarpSize * kLaneTokens);

/// Threads per block for a row of V tokens: about 16 tokens per thread, whole warps, 32..1024 (the
/// block reductions below need whole warps, at most kWarpSize of them).
inline int row_block_threads(int64_t vocab) {
  const int64_t wanted = (vocab + 15) / 16;
  const int64_t warps = (wanted + kWarpSize - 1) / kWarpSize;
  return static_cast<int>(warps < 1 ? 1 : warps > 32 ? 32 : warps) * kWarpSize;
}

// The better of two (value, index) candidates: larger value, then lower index (docs/verifiers.md
// V2).
__device__ inline void take_better(float* value, int32_t* index, float other_value,
                                   int32_t other_index) {
  if (other_value > *value || (other_value == *value && other_index < *index)) {
    *value = other_value;
    *index = other_index;
  }
}

/// A block argmax candidate: take_better's order (the larger value, then the lower index).
struct Argmax {
  float value;
  int32_t index;
  __device__ void merge(const Argmax& other) {
    take_better(&value, &index, other.value, other.index);
  }
  __device__ Argmax shuffled_xor(int offset) const {
    return {__shfl_xor_sync(kFullMask, value, offset), __shfl_xor_sync(kFullMask, index, offset)};
  }
};

/// A warp's best candidate, in every lane: a butterfly of C::merge (which must be associative and
/// commutative, as take_better is) over C::shuffled_xor. The whole warp must call.
template <class C>
__device__ inline C warp_best(C c) {
  for (int offset = kWarpSize / 2; offset > 0; offset >>= 1) c.merge(c.shuffled_xor(offset));
  return c;
}

/// The block's best of every thread's candidate, in every lane of warp 0 (another warp holds its
/// own warp's best). `slots` is kWarpSize candidates of shared memory, `identity` what an absent
/// warp contributes. One barrier: the caller publishes warp 0's result and synchronises before
/// another warp reads it or the slots are written again. The whole block must call.
template <class C>
__device__ inline C block_best(C c, C identity, C* slots) {
  const int lane = static_cast<int>(threadIdx.x) % kWarpSize;
  const int warp = static_cast<int>(threadIdx.x) / kWarpSize;
  const int n_warps = static_cast<int>(blockDim.x) / kWarpSize;
  c = warp_best(c);
  if (lane == 0) slots[warp] = c;
  __syncthreads();
  if (warp == 0) c = warp_best(lane < n_warps ? slots[lane] : identity);
  return c;
}

/// Block-wide scratch at the start of dynamic shared memory (poisoned per block in emulation).
struct BlockScratch {
  uint64_t warp_totals[kWarpSize];
  double warp_sums[kWarpSize][2];
  Argmax warp_best[kWarpSize];
  uint64_t total;
  double sums[2];
  int32_t best_index;
};

template <KernelMutant kMutant>
__device__ uint64_t warp_sum(uint64_t v) {
  const unsigned mask = kMutant == KernelMutant::kShuffleMask ? 0x0000ffffu : kFullMask;
  for (int offset = kWarpSize / 2; offset > 0; offset >>= 1) v += __shfl_xor_sync(mask, v, offset);
  return v;
}

__device__ inline double warp_sum_double(double v) {
  for (int offset = kWarpSize / 2; offset > 0; offset >>= 1) {
    v += __shfl_xor_sync(kFullMask, v, offset);
  }
  return v;
}

template <KernelMutant kMutant>
__device__ uint64_t warp_inclusive_scan(uint64_t v, int lane) {
  for (int offset = kMutant == KernelMutant::kShuffleOffset ? 2 : 1; offset < kWarpSize;
       offset <<= 1) {
    const uint64_t below = __shfl_up_sync(kFullMask, v, static_cast<unsigned>(offset));
    if (lane >= offset) v += below;
  }
  return v;
}

/// Exclusive prefix of v over the block's threads in thread order; *total gets the block total.
template <KernelMutant kMutant>
__device__ uint64_t block_exclusive_scan(uint64_t v, BlockScratch* scratch, uint64_t* total) {
  const int lane = static_cast<int>(threadIdx.x) % kWarpSize;
  const int warp = static_cast<int>(threadIdx.x) / kWarpSize;
  const int n_warps = static_cast<int>(blockDim.x) / kWarpSize;
  const uint64_t inclusive = warp_inclusive_scan<kMutant>(v, lane);
  if (lane == kWarpSize - 1) scratch->warp_totals[warp] = inclusive;
  if constexpr (kMutant != KernelMutant::kMissingSync) __syncthreads();
  if (warp == 0) {
    const uint64_t w = lane < n_warps ? scratch->warp_totals[lane] : 0;
    const uint64_t w_inclusive = warp_inclusive_scan<kMutant>(w, lane);
    if (lane < n_warps) scratch->warp_totals[lane] = w_inclusive - w;
    if (lane == kWarpSize - 1) scratch->total = w_inclusive;
  }
  __syncthreads();
  *total = scratch->total;
  const uint64_t exclusive = scratch->warp_totals[warp] + inclusive - v;
  __syncthreads();  // the scratch may be reused once every thread has read it
  return exclusive;
}

/// Block sums of two doubles (row sums for the 1 ± 1e-4 check), broadcast to every thread.
__device__ inline void block_sum2(double* a, double* b, BlockScratch* scratch) {
  const int lane = static_cast<int>(threadIdx.x) % kWarpSize;
  const int warp = static_cast<int>(threadIdx.x) / kWarpSize;
  const int n_warps = static_cast<int>(blockDim.x) / kWarpSize;
  const double wa = warp_sum_double(*a), wb = warp_sum_double(*b);
  if (lane == 0) {
    scratch->warp_sums[warp][0] = wa;
    scratch->warp_sums[warp][1] = wb;
  }
  __syncthreads();
  if (warp == 0) {
    const double ta = warp_sum_double(lane < n_warps ? scratch->warp_sums[lane][0] : 0.0);
    const double tb = warp_sum_double(lane < n_warps ? scratch->warp_sums[lane][1] : 0.0);
    if (lane == 0) {
      scratch->sums[0] = ta;
      scratch->sums[1] = tb;
    }
  }
  __syncthreads();
  *a = scratch->sums[0];
  *b = scratch->sums[1];
  __syncthreads();
}

}  // namespace speclab::gpu::detail
