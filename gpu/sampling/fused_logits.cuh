// core::probs_from_logits' temperature softmax (unfiltered) fused into the kernels: a logits row
// is reduced once to its statistics (compute_row_stats) and read through LogitsProbRow, bitwise
// core's p(t). Passes and bytes read: gpu/README.md "Row statistics"; V2 on logits:
// proofs/gpu_kernels.md §3.
#pragma once

#include <cstdint>

#include "gpu/base/device.cuh"
#include "gpu/base/device_types.hpp"
#include "gpu/base/reduce.cuh"
#include "gpu/base/simt.cuh"
#include "gpu/sampling/logits.cuh"

namespace speclab::gpu::detail {

/// −2^-22: a runner-up whose tempered gap x is below this cannot tie the max in p (fact (3)).
inline constexpr float kGreedyTieGap = -2.384185791015625e-7f;

/// Where one model's logits live and how they are tempered (block-uniform).
struct LogitsSource {
  const void* data;  // [rows, V] of `format`
  int format;        // LogitsFormat
  float scale;       // float(1/T) as core; unused when greedy
  int greedy;        // T == 0
};

/// Statistics of one logits row (compute_row_stats).
struct LogitsRowStats {
  float max;        // the largest logit
  float runner_up;  // the largest logit below max (-inf if none)
  float norm;       // core's float(1/total) (T > 0)
  int32_t argmax;   // the lowest id holding max
  uint32_t status;  // kChainBadValue (a NaN/+inf logit), kChainBadSum (every logit -inf)
};

/// A block argmax candidate that also carries the runner-up, the largest value below the max
/// (block_best's C): merging keeps the larger max, the lower index on ties, and the largest value
/// below the merged max.
struct ArgmaxRunnerUp {
  float best;
  int32_t index;
  float second;
  __device__ void merge(const ArgmaxRunnerUp& other) {
    const float merged = other.best > best ? other.best : best;
    float s = other.second > second ? other.second : second;
    if (best < merged && best > s) s = best;
    if (other.best < merged && other.best > s) s = other.best;
    take_better(&best, &index, other.best, other.index);
    second = s;
  }
  __device__ ArgmaxRunnerUp shuffled_xor(int offset) const {
    return {__shfl_xor_sync(kFullMask, best, offset), __shfl_xor_sync(kFullMask, index, offset),
            __shfl_xor_sync(kFullMask, second, offset)};
  }
};

/// Dynamic shared memory of compute_row_stats.
struct RowStatsScratch {
  ArgmaxRunnerUp warp_best[2][kWarpSize];
  double block_totals[kMaxNormaliserGroups];
  LogitsRowStats result[2];
  int32_t lowest[kWarpSize];
};

// Kernels place 8-byte data (chunk sums) right after this scratch.
static_assert(sizeof(RowStatsScratch) % 8 == 0, "RowStatsScratch must keep 8-byte alignment");

/// The logit at row-relative token t, converted to float exactly (format is block-uniform).
__device__ inline float logit_at(const void* row, int format, int64_t t) {
  if (format == static_cast<int>(LogitsFormat::kFloat16)) {
    return load_logit<LogitsFormat::kFloat16>(row, t);
  }
  if (format == static_cast<int>(LogitsFormat::kBFloat16)) {
    return load_logit<LogitsFormat::kBFloat16>(row, t);
  }
  return load_logit<LogitsFormat::kFloat32>(row, t);
}

/// Row `row` of a source as a pointer to its first element.
__device__ inline const void* logits_row(const LogitsSource& source, int64_t row, int64_t vocab) {
  if (source.format == static_cast<int>(LogitsFormat::kFloat32)) {
    return static_cast<const float*>(source.data) + row * vocab;
  }
  return static_cast<const uint16_t*>(source.data) + row * vocab;
}

/// One row of probabilities computed from its logits and statistics: p(t) bitwise core's.
struct LogitsProbRow {
  const void* logits;
  int format;
  float scale;
  int greedy;
  float max;
  float norm;
  int32_t argmax;

  /// core's e_t = exp_nonpositive((l_t − max)·scale) (T > 0).
  __device__ float exponential(int64_t t) const {
    return exp_nonpositive((logit_at(logits, format, t) - max) * scale);
  }
  __device__ float operator()(int64_t t) const {
    if (greedy != 0) return t == argmax ? 1.0f : 0.0f;
    return exponential(t) * norm;
  }
};

__device__ inline LogitsProbRow prob_row(const LogitsSource& source, const void* row,
                                         const LogitsRowStats& stats) {
  return {row, source.format, source.scale, source.greedy, stats.max, stats.norm, stats.argmax};
}

/// Statistics of n_rows (1 or 2, block-uniform) logits rows: rows[j] of sources[j]. with_norm
/// false skips step B (V2 needs only the max). Results in scratch->result[0..n_rows), visible to
/// every thread on return.
__device__ inline void compute_row_stats(const LogitsSource* sources, const void* const* rows,
                                         int n_rows, int64_t vocab, bool with_norm,
                                         RowStatsScratch* scratch) {
  const float infinity = float_from_bits(0x7f800000u);

  // A. Checks, argmax and runner-up.
  int bad[2] = {0, 0}, finite[2] = {0, 0};
  const ArgmaxRunnerUp none{-infinity, 0x7fffffff, -infinity};
  for (int j = 0; j < n_rows; ++j) {
    ArgmaxRunnerUp best = none;
    for (int64_t t = threadIdx.x; t < vocab; t += blockDim.x) {
      const float x = logit_at(rows[j], sources[j].format, t);
      bad[j] |= !(x < infinity);
      finite[j] |= x > -infinity;
      if (x > best.best) {  // ascending t: the first of equal values stays
        best.second = best.best;
        best.best = x;
        best.index = static_cast<int32_t>(t);
      } else if (x < best.best && x > best.second) {
        best.second = x;
      }
    }
    best = block_best(best, none, scratch->warp_best[j]);
    if (threadIdx.x == 0) {
      scratch->result[j].max = best.best;
      scratch->result[j].argmax = best.index;
      scratch->result[j].runner_up = best.second;
      scratch->result[j].norm = 0.0f;
    }
  }
  for (int j = 0; j < 2; ++j) {
    bad[j] = __syncthreads_or(bad[j]);
    finite[j] = __syncthreads_or(finite[j]);
  }
  bool need_norm[2] = {false, false};
  bool any_norm = false;
  for (int j = 0; j < n_rows; ++j) {
    const uint32_t status = bad[j] != 0 ? kChainBadValue : finite[j] == 0 ? kChainBadSum : kChainOk;
    if (threadIdx.x == 0) scratch->result[j].status = status;
    need_norm[j] = with_norm && status == kChainOk && sources[j].greedy == 0;
    any_norm |= need_norm[j];
  }
  if (!any_norm) {  // block-uniform
    __syncthreads();
    return;
  }

  // B. core's normaliser in its fixed block order, one row after the other.
  for (int j = 0; j < n_rows; ++j) {
    if (!need_norm[j]) continue;  // block-uniform
    const float shift = scratch->result[j].max, scale = sources[j].scale;
    const void* row = rows[j];
    const int format = sources[j].format;
    const double total = block_normaliser(
        [&](int64_t t) { return exp_nonpositive((logit_at(row, format, t) - shift) * scale); },
        [](int64_t, float) {}, vocab, scratch->block_totals);
    if (threadIdx.x == 0) scratch->result[j].norm = static_cast<float>(1.0 / total);
  }
  __syncthreads();
}

/// core's V2 token on the row's probabilities, from its logits and statistics (see the header
/// comment): the argmax unless the runner-up is within 2^-22 of the max after tempering, then the
/// lowest t with e_t = 1 by one more pass. Block-uniform.
__device__ inline int32_t greedy_token(const LogitsProbRow& row, const LogitsRowStats& stats,
                                       int64_t vocab, RowStatsScratch* scratch) {
  if (row.greedy != 0) return stats.argmax;
  const float gap = (stats.runner_up - stats.max) * row.scale;  // x of the runner-up
  if (gap < kGreedyTieGap) return stats.argmax;                 // false for NaN: exact pass
  const int lane = static_cast<int>(threadIdx.x) % kWarpSize;
  const int warp = static_cast<int>(threadIdx.x) / kWarpSize;
  const int n_warps = static_cast<int>(blockDim.x) / kWarpSize;
  int32_t lowest = 0x7fffffff;
  for (int64_t t = threadIdx.x; t < vocab; t += blockDim.x) {
    if (row.exponential(t) == 1.0f) {  // ascending t: the first hit is this thread's lowest
      lowest = static_cast<int32_t>(t);
      break;
    }
  }
  for (int offset = kWarpSize / 2; offset > 0; offset >>= 1) {
    const int32_t other = __shfl_xor_sync(kFullMask, lowest, offset);
    lowest = other < lowest ? other : lowest;
  }
  if (lane == 0) scratch->lowest[warp] = lowest;
  __syncthreads();
  int32_t result = 0x7fffffff;
  for (int w = 0; w < n_warps; ++w) {
    result = scratch->lowest[w] < result ? scratch->lowest[w] : result;
  }
  __syncthreads();                                // lowest[] may be rewritten by the next call
  return result < vocab ? result : stats.argmax;  // the argmax always has e = 1
}

/// The host-side LogitsSource of a DeviceLogits (T checked by the launcher).
inline LogitsSource logits_source(const DeviceLogits& logits) {
  LogitsSource source{};
  source.data = logits.data.empty() ? nullptr : logits.data.data();
  source.format = static_cast<int>(logits.format);
  source.greedy = logits.temperature == 0.0 ? 1 : 0;
  source.scale = logits.temperature == 0.0 ? 0.0f : static_cast<float>(1.0 / logits.temperature);
  return source;
}

/// Bytes of dynamic shared memory compute_row_stats needs after its caller's own layout (aligned).
inline size_t logits_shared_bytes() { return sizeof(RowStatsScratch); }

}  // namespace speclab::gpu::detail
