// The row sampler of every device kernel that draws a token from a row: one pass over the row in
// chunks of 256 tokens that sums fixed-point weights (core/base/rules.hpp) and checks the values,
// then the inverse-CDF locate over the chunk sums, bit for bit core's sampler. The weights are the
// row's p (bonus, plain sampling) or the residual max(0, p − l·q); a row is an accessor, so the
// fused-logits kernels pass rows computed from their logits.
#pragma once

#include <cstdint>
#include <type_traits>

#include "core/base/rules.hpp"
#include "gpu/base/device.cuh"
#include "gpu/base/device_types.hpp"
#include "gpu/base/reduce.cuh"
#include "gpu/base/simt.cuh"

namespace speclab::gpu::detail {

inline constexpr float kFloatMax = 3.40282347e38f;

/// A probability row in memory, read as p(t): the accessor the row passes take, so the fused
/// logits kernels (gpu/sampling/fused_logits.cuh) can pass rows that compute p(t) instead.
struct ProbRowRef {
  const float* p;
  __device__ float operator()(int64_t t) const { return p[t]; }
};

__device__ inline bool valid_probability(float x) { return x >= 0.0f && x <= kFloatMax; }

// A gathered p(x) or q(x): as core's validate_probability_value, finite and in [0, 1 + 1e-4].
__device__ inline bool valid_gathered(float x) {
  return valid_probability(x) && static_cast<double>(x) <= 1.0 + kProbSumTolerance;
}

__device__ inline bool sum_ok(double sum) {
  const double off = sum - 1.0;
  return off <= kProbSumTolerance && -off <= kProbSumTolerance;
}

/// The part of a kernel's state the locate step reads and writes (a verifier's RequestState has
/// the same members): the chunk that holds the target and its prefix, the token found, status bits.
struct LocateState {
  int64_t chunk;
  uint64_t chunk_base;
  uint32_t status;
  int32_t last;
};

/// Sampling weight of token t: the residual max(0, p - l·q) or the bonus/fallback weight p.
/// P and Q are row accessors (ProbRowRef, or a fused logits row).
template <bool kResidual, class P, class Q>
__device__ inline uint64_t weight_at(const P& p, const Q& q, float leniency, int64_t t) {
  if constexpr (kResidual) {
    return residual_fixed(p(t), q(t), leniency);
  } else {
    return to_fixed(p(t));
  }
}

template <class P>
inline constexpr bool kMemoryRow = std::is_same_v<P, ProbRowRef>;

/// Whether a row in memory can be read with 16-byte loads (rows computed on the fly cannot).
template <class P>
__device__ inline bool row_vector_aligned(const P& p) {
  if constexpr (kMemoryRow<P>) {
    return p.p == nullptr || reinterpret_cast<uintptr_t>(p.p) % sizeof(Float4) == 0;
  } else {
    return false;
  }
}

/// A lane's share of the row checks: float partials per chunk (at most 8 values each, so the
/// partial is within 8·2^-24 relative of the exact sum), added to double accumulators per chunk.
struct LaneRowChecks {
  double sum_p = 0.0, sum_q = 0.0;
  int invalid = 0;
};

/// Lane `lane`'s fixed-point weight sum over chunk c, and its values added to the row checks. A
/// whole chunk of aligned memory rows is read with two 16-byte loads per row (lane k takes tokens
/// 4k..4k+3 of each half chunk); otherwise lane k takes tokens k, k+32, …, as before. Integer sums
/// make the chunk's total independent of which lane adds which token.
template <bool kResidual, KernelMutant kMutant, class P, class Q>
__device__ inline uint64_t lane_chunk_weights(const P& p, const Q& q, float leniency, int64_t vocab,
                                              int64_t c, int lane, bool vector_rows,
                                              LaneRowChecks* checks) {
  uint64_t w = 0;
  float part_p = 0.0f, part_q = 0.0f;
  int invalid = 0;
  const auto take = [&](float pv, float qv) {
    invalid |= !valid_probability(pv);
    part_p += pv;
    if constexpr (kResidual) {
      invalid |= !valid_probability(qv);
      part_q += qv;
      w += residual_fixed(pv, qv, leniency);
    } else {
      w += to_fixed(pv);
    }
  };
  const int64_t chunk_begin = c * kChunkTokens;
  bool done = false;
  if constexpr (kMemoryRow<P> && kMemoryRow<Q>) {
    if (vector_rows && chunk_begin + kChunkTokens <= vocab) {
      for (int half = 0; half < kLaneTokens / 4; ++half) {
        const int64_t t = chunk_begin + half * (kWarpSize * 4) + lane * 4;
        const Float4 pv = *reinterpret_cast<const Float4*>(p.p + t);
        Float4 qv{};
        if constexpr (kResidual) qv = *reinterpret_cast<const Float4*>(q.p + t);
        take(pv.x, qv.x);
        take(pv.y, qv.y);
        take(pv.z, qv.z);
        take(pv.w, qv.w);
      }
      done = true;
    }
  }
  if (!done) {
    const int64_t first = chunk_begin + lane;
    for (int k = 0; k < kLaneTokens; ++k) {
      const int64_t t = first + static_cast<int64_t>(k) * kWarpSize;
      const bool in_row = kMutant == KernelMutant::kGridStrideOffByOne ? t <= vocab : t < vocab;
      if (in_row) take(p(t), kResidual ? q(t) : 0.0f);
    }
  }
  checks->sum_p += part_p;
  checks->sum_q += part_q;
  checks->invalid |= invalid;
  return w;
}

/// Chunks [c_begin, c_end) of a row: warps stride over them, each chunk's fixed-point weight sum
/// is written to chunk_sums[c] (lane 0), and the values go into the thread's row checks. No
/// barrier: the caller reduces the checks (and so makes the chunk sums visible to the block).
template <bool kResidual, KernelMutant kMutant, class P, class Q>
__device__ void chunk_range_pass(const P& p, const Q& q, float leniency, int64_t vocab,
                                 int64_t c_begin, int64_t c_end, uint64_t* chunk_sums,
                                 LaneRowChecks* checks) {
  const int lane = static_cast<int>(threadIdx.x) % kWarpSize;
  const int warp = static_cast<int>(threadIdx.x) / kWarpSize;
  const int n_warps = static_cast<int>(blockDim.x) / kWarpSize;
  const bool vector_rows = row_vector_aligned(p) && (!kResidual || row_vector_aligned(q));
  for (int64_t c = c_begin + warp; c < c_end; c += n_warps) {  // warps stride over chunks
    uint64_t w =
        lane_chunk_weights<kResidual, kMutant>(p, q, leniency, vocab, c, lane, vector_rows, checks);
    w = warp_sum<kMutant>(w);
    if (lane == 0) chunk_sums[c] = w;
  }
}

/// The status bits of a row's checks once reduced over the row.
template <bool kResidual>
__device__ inline uint32_t row_check_status(int invalid, double sum_p, double sum_q) {
  uint32_t status = invalid != 0 ? kChainBadValue : kChainOk;
  if (!sum_ok(sum_p) || (kResidual && !sum_ok(sum_q))) status |= kChainBadSum;
  return status;
}

/// The single pass over a row: per-chunk fixed-point weight sums into chunk_sums, and the row
/// checks (block-uniform status bits; q is checked for a residual). P and Q are row accessors.
template <bool kResidual, KernelMutant kMutant, class P, class Q>
__device__ uint32_t weight_pass(const P& p, const Q& q, float leniency, int64_t vocab,
                                int64_t n_chunks, uint64_t* chunk_sums, BlockScratch* scratch) {
  LaneRowChecks checks;
  chunk_range_pass<kResidual, kMutant>(p, q, leniency, vocab, 0, n_chunks, chunk_sums, &checks);
  const int invalid = __syncthreads_or(checks.invalid);  // also makes chunk_sums visible
  block_sum2(&checks.sum_p, &checks.sum_q, scratch);
  return row_check_status<kResidual>(invalid, checks.sum_p, checks.sum_q);
}

/// Inverse-CDF sampling over the chunk sums of the last weight_pass: the token whose fixed-point
/// prefix first exceeds fixed_target(bits, total). Sets state->last (or kChainInternal) and
/// returns the total (0: nothing to sample). Block-uniform.
/// `weight(t)` gives token t's fixed-point weight (the same function the chunk sums were made
/// of); `state` has chunk, chunk_base, last and status. Shared by the chain and block kernels.
template <KernelMutant kMutant, class Weight, class State>
__device__ uint64_t locate_by(Weight weight, int64_t vocab, int64_t n_chunks,
                              const uint64_t* chunk_sums, uint32_t bits, BlockScratch* scratch,
                              State* state) {
  const int lane = static_cast<int>(threadIdx.x) % kWarpSize;
  const int64_t per_thread = (n_chunks + blockDim.x - 1) / blockDim.x;
  const int64_t begin = threadIdx.x * per_thread;
  const int64_t end = begin + per_thread < n_chunks ? begin + per_thread : n_chunks;
  uint64_t own = 0;
  for (int64_t c = begin; c < end; ++c) own += chunk_sums[c];
  uint64_t total = 0;
  uint64_t running = block_exclusive_scan<kMutant>(own, scratch, &total);
  if (total == 0) return 0;
  const uint64_t target = fixed_target(bits, total);
  for (int64_t c = begin; c < end; ++c) {
    const uint64_t s = chunk_sums[c];
    if (target >= running && target - running < s) {  // exactly one chunk in the block
      state->chunk = c;
      state->chunk_base = running;
    }
    running += s;
  }
  __syncthreads();
  if (threadIdx.x < kWarpSize) {
    const int64_t c = state->chunk;
    uint64_t cumulative = state->chunk_base;
    int64_t token = -1;
    if (c >= 0) {
      for (int k = 0; k < kLaneTokens; ++k) {
        const int64_t t = c * kChunkTokens + static_cast<int64_t>(k) * kWarpSize + lane;
        const uint64_t w = t < vocab ? weight(t) : 0;
        const uint64_t inclusive = warp_inclusive_scan<kMutant>(w, lane);
        const unsigned hits = __ballot_sync(kFullMask, cumulative + inclusive > target);
        if (hits != 0) {
          token = c * kChunkTokens + static_cast<int64_t>(k) * kWarpSize +
                  __ffs(static_cast<int>(hits)) - 1;
          break;
        }
        cumulative += __shfl_sync(kFullMask, inclusive, kWarpSize - 1);
      }
    }
    if (lane == 0) {
      if (token >= 0 && token < vocab) {
        state->last = static_cast<int32_t>(token);
      } else {
        state->status |= kChainInternal;
      }
    }
  }
  __syncthreads();
  return total;
}

template <bool kResidual, KernelMutant kMutant, class P, class Q, class State>
__device__ uint64_t locate(const P& p, const Q& q, float leniency, int64_t vocab, int64_t n_chunks,
                           const uint64_t* chunk_sums, uint32_t bits, BlockScratch* scratch,
                           State* state) {
  return locate_by<kMutant>([&](int64_t t) { return weight_at<kResidual>(p, q, leniency, t); },
                            vocab, n_chunks, chunk_sums, bits, scratch, state);
}

}  // namespace speclab::gpu::detail
