// Block verification kernel, docs/verifiers.md V5 (header gpu/verify_block.hpp), one CTA per request:
//  1. warp 0 checks n_draft and the draft tokens, gathers p_i(x_i), q_i(x_i) (a ballot of bad
//     values), and lane 0 forms w_0..w_{γ_b} serially in double, exactly as core::block_weights;
//  2. positions i = γ_b, γ_b − 1, …, 1 are tested downwards (τ is the last pass): i = γ_b against
//     h = w_{γ_b}; i < γ_b by one pass over rows p_{i+1}, q_{i+1} in the chunk layout of the
//     chain kernel, accumulating the Z_i terms max(0, w_i·p − q) in double, the row checks, and
//     the chunk sums of the fixed-point residual block_residual_fixed(float(w_i), p, q). A block
//     reduction gives Z_i; near-ties are re-decided with a serial, core-order Z_i by thread 0;
//  3. the residual at τ (its chunk sums are already built by the pass that passed; τ = 0 takes
//     one pass over position 1, p_1 and q_1, with w_0 = 1) or the bonus row p_{γ_b+1} is sampled by
//     the chain kernel's exact fixed-point inverse CDF; a zero-mass residual falls back to p.
#pragma once

#include <cstdint>

#include "core/base/philox.hpp"
#include "core/base/rules.hpp"
#include "gpu/fused_logits.cuh"
#include "gpu/simt.cuh"
#include "gpu/verify_block.hpp"
#include "gpu/verify_chain.cuh"

namespace speclab::gpu::detail {

struct BlockKernelArgs {
  const float* probs_target;    // [B, γ+1, V] (probability kernel)
  const float* probs_draft;     // [B, γ, V] (probability kernel)
  LogitsSource target;          // [B, γ+1, V] (logits kernel)
  LogitsSource draft;           // [B, γ, V] (logits kernel)
  const int32_t* draft_tokens;  // [B, γ]
  const int32_t* n_draft;       // [B] or null (all γ)
  const uint32_t* request_ids;  // [B] or null (0..B-1)
  int32_t* emitted_tokens;      // [B, γ+1]
  int32_t* n_accepted;          // [B]
  uint8_t* accept_mask;         // [B, γ]
  uint8_t* residual_fallback;   // [B]
  uint32_t* status;             // [B]
  int64_t gamma;
  int64_t vocab;
  int64_t n_chunks;  // ⌈V / kChunkTokens⌉
  uint64_t seed;
  uint32_t step;
  int always_serial_z;
  const DeviceSeedStep* seed_step;  // when set, seed and step are read from it
};

struct BlockRequestState {
  int64_t n_draft;
  int64_t tau;
  int64_t chunk;
  uint64_t chunk_base;
  uint32_t status;
  int32_t last;
  int32_t fallback;
  int32_t passed;  // the last test's decision
};

/// core's block_residual_fixed (core/verify/verify_block.hpp, host-only there), the same float
/// operations: to_fixed(w·p − q).
__device__ inline uint64_t block_residual_weight(float weight, float prob_target,
                                                 float prob_draft) {
  const float scaled_target = weight * prob_target;
  return to_fixed(scaled_target - prob_draft);
}

/// One Z_i term as core computes it: std::max(0.0, w·double(p) − double(q)).
__device__ inline double z_term(double weight, float prob_target, float prob_draft) {
  const double d = weight * static_cast<double>(prob_target) - static_cast<double>(prob_draft);
  return 0.0 < d ? d : 0.0;  // std::max(0.0, d) returns its first argument unless 0.0 < d
}

/// h_i from Z_i as core: Z / (Z + (1 − w)), clamped to 1, and 1 on a zero denominator.
__device__ inline double pass_probability(double z, double weight) {
  const double denominator = z + (1.0 - weight);
  if (!(denominator > 0.0)) return 1.0;
  const double h = z / denominator;
  return h < 1.0 ? h : 1.0;  // std::min(1.0, h)
}

/// One pass over row p (and q when kResidual): fixed-point chunk sums of the residual weights
/// block_residual_weight(wf, p, q) (or to_fixed(p)), the Z terms in double (kResidual), and the
/// row checks. Returns block-uniform status bits; *z gets the block-uniform Z. P and Q are row
/// accessors (ProbRowRef or LogitsProbRow).
template <bool kResidual, class P, class Q>
__device__ uint32_t block_row_pass(const P& p, const Q& q, double w, float wf, int64_t vocab,
                                   int64_t n_chunks, uint64_t* chunk_sums, BlockScratch* scratch,
                                   double* z) {
  const int lane = static_cast<int>(threadIdx.x) % kWarpSize;
  const int warp = static_cast<int>(threadIdx.x) / kWarpSize;
  const int n_warps = static_cast<int>(blockDim.x) / kWarpSize;
  double sum_p = 0.0, sum_q = 0.0, z_part = 0.0;
  int invalid = 0;
  for (int64_t c = warp; c < n_chunks; c += n_warps) {
    uint64_t s = 0;
    const int64_t first = c * kChunkTokens + lane;
    for (int k = 0; k < kLaneTokens; ++k) {
      const int64_t t = first + static_cast<int64_t>(k) * kWarpSize;
      if (t < vocab) {
        const float pv = p(t);
        invalid |= !valid_probability(pv);
        sum_p += pv;
        if constexpr (kResidual) {
          const float qv = q(t);
          invalid |= !valid_probability(qv);
          sum_q += qv;
          s += block_residual_weight(wf, pv, qv);
          z_part += z_term(w, pv, qv);
        } else {
          s += to_fixed(pv);
        }
      }
    }
    s = warp_sum<KernelMutant::kNone>(s);
    if (lane == 0) chunk_sums[c] = s;
  }
  invalid = __syncthreads_or(invalid);  // also makes chunk_sums visible to the block
  block_sum2(&sum_p, &sum_q, scratch);
  if constexpr (kResidual) {
    double unused = 0.0;
    block_sum2(&z_part, &unused, scratch);
  }
  *z = z_part;
  uint32_t status = invalid != 0 ? kChainBadValue : kChainOk;
  if (!sum_ok(sum_p) || (kResidual && !sum_ok(sum_q))) status |= kChainBadSum;
  return status;
}

/// Inverse-CDF sampling over the chunk sums of the last block_row_pass (the chain kernel's
/// locate with the V5 residual weight): sets state->last (or kChainInternal) and returns the
/// total (0: nothing to sample). Block-uniform.
template <bool kResidual, class P, class Q>
__device__ uint64_t block_locate(const P& p, const Q& q, float wf, int64_t vocab, int64_t n_chunks,
                                 const uint64_t* chunk_sums, uint32_t bits, BlockScratch* scratch,
                                 BlockRequestState* state) {
  if (threadIdx.x == 0) state->chunk = -1;  // read only after the scan's barriers
  return locate_by<KernelMutant::kNone>(
      [&](int64_t t) { return kResidual ? block_residual_weight(wf, p(t), q(t)) : to_fixed(p(t)); },
      vocab, n_chunks, chunk_sums, bits, scratch, state);
}

/// Dynamic shared memory: BlockScratch, w[γ+1] (double), chunk_sums[n_chunks], the gathered
/// p_i(x_i), q_i(x_i) as float[γ] each; with kLogits then (8-byte aligned) RowStatsScratch, the row
/// statistics of target rows [γ+1] and draft rows [γ], and the exponential tiles.
SPECLAB_HD inline size_t block_gathered_end(int64_t gamma, int64_t n_chunks) {
  return sizeof(BlockScratch) + static_cast<size_t>(gamma + 1) * sizeof(double) +
         static_cast<size_t>(n_chunks) * sizeof(uint64_t) +
         2 * static_cast<size_t>(gamma) * sizeof(float);
}

inline size_t block_shared_bytes(int64_t gamma, int64_t n_chunks, bool logits = false) {
  if (!logits) return block_gathered_end(gamma, n_chunks);
  const size_t aligned = (block_gathered_end(gamma, n_chunks) + 7) / 8 * 8;
  return aligned + sizeof(RowStatsScratch) +
         static_cast<size_t>(2 * gamma + 1) * sizeof(LogitsRowStats) +
         2 * static_cast<size_t>(kExpTile) * sizeof(float);
}

/// V5 on probability rows (kLogits false) or on logits rows with the fused softmax (kLogits
/// true): the same steps; the logits kernel first reduces rows 1..γ_b of p and q (statistics in
/// shared memory) and reads every row through LogitsProbRow.
template <bool kLogits>
__global__ void __launch_bounds__(1024) verify_block_kernel(BlockKernelArgs a) {
  __shared__ BlockRequestState state;
  SPECLAB_DYNAMIC_SHARED(uint64_t, shared);
  BlockScratch* scratch = reinterpret_cast<BlockScratch*>(shared);
  double* w = reinterpret_cast<double*>(shared + sizeof(BlockScratch) / sizeof(uint64_t));
  uint64_t* chunk_sums = reinterpret_cast<uint64_t*>(w + a.gamma + 1);
  float* gathered_p = reinterpret_cast<float*>(chunk_sums + a.n_chunks);
  float* gathered_q = gathered_p + a.gamma;

  const int64_t r = blockIdx.x;
  const int lane = static_cast<int>(threadIdx.x) % kWarpSize;
  const int64_t g = a.gamma, v = a.vocab;
  const uint32_t request = a.request_ids != nullptr ? a.request_ids[r] : static_cast<uint32_t>(r);
  const int32_t* tokens = a.draft_tokens + r * g;
  uint64_t seed = 0;
  uint32_t step = 0;
  launch_seed_step(a, &seed, &step);

  // Rows as accessors: row i (0-based) of the request's p and q.
  const size_t logits_offset = (block_gathered_end(g, a.n_chunks) + 7) / 8 * 8;
  RowStatsScratch* logits_scratch =
      reinterpret_cast<RowStatsScratch*>(reinterpret_cast<unsigned char*>(shared) + logits_offset);
  LogitsRowStats* target_stats = reinterpret_cast<LogitsRowStats*>(logits_scratch + 1);
  LogitsRowStats* draft_stats = target_stats + g + 1;
  float* tile = reinterpret_cast<float*>(draft_stats + g);
  const LogitsSource sources[2] = {a.target, a.draft};
  auto target_row = [&](int64_t i) {
    if constexpr (kLogits) {
      return prob_row(a.target, logits_row(a.target, r * (g + 1) + i, v), target_stats[i]);
    } else {
      return ProbRowRef{a.probs_target + (r * (g + 1) + i) * v};
    }
  };
  auto draft_row = [&](int64_t i) {
    if constexpr (kLogits) {
      return prob_row(a.draft, logits_row(a.draft, r * g + i, v), draft_stats[i]);
    } else {
      return ProbRowRef{a.probs_draft + (r * g + i) * v};
    }
  };

  // 1. Warp 0: n_draft and the draft tokens.
  if (threadIdx.x < kWarpSize) {
    int64_t n_draft = 0;
    const uint32_t status = check_drafts(a.n_draft, r, g, v, tokens, lane, &n_draft);
    if (lane == 0) {
      state.n_draft = n_draft;
      state.status = status;
    }
  }
  __syncthreads();
  if constexpr (kLogits) {
    // The statistics of rows 1..γ_b of p and q, a pair at a time.
    const int64_t n_draft = state.status == kChainOk ? state.n_draft : 0;
    for (int64_t i = 0; i < n_draft; ++i) {
      const void* rows[2] = {logits_row(a.target, r * (g + 1) + i, v),
                             logits_row(a.draft, r * g + i, v)};
      compute_row_stats(sources, rows, 2, v, true, logits_scratch, tile);
      if (threadIdx.x == 0) {
        target_stats[i] = logits_scratch->result[0];
        draft_stats[i] = logits_scratch->result[1];
        state.status |= target_stats[i].status | draft_stats[i].status;
      }
      __syncthreads();
      const bool bad = state.status != kChainOk;
      __syncthreads();  // read before the next pair may write it
      if (bad) break;
    }
    __syncthreads();  // state.status was read above (also when no pair ran); warp 0 writes it next
  }

  // 2. Warp 0: the gathered values and w (lane 0, core's order).
  if (threadIdx.x < kWarpSize) {
    const int64_t n_draft = state.n_draft;
    uint32_t status = state.status;
    if (status == kChainOk) {
      int invalid = 0;
      for (int64_t i = lane; i < n_draft; i += kWarpSize) {
        const int32_t x = tokens[i];
        const float pv = target_row(i)(x), qv = draft_row(i)(x);
        invalid |= !valid_gathered(pv) || !valid_gathered(qv);
        gathered_p[i] = pv;
        gathered_q[i] = qv;
      }
      if (__any_sync(kFullMask, invalid)) status |= kChainBadValue;
    }
    __syncwarp(kFullMask);
    if (lane == 0) {
      w[0] = 1.0;
      if (status == kChainOk) {
        for (int64_t i = 1; i <= n_draft; ++i) {  // core::block_weights, operation for operation
          const double p = gathered_p[i - 1];
          const double q = gathered_q[i - 1];
          double wi = 0.0;
          if (q > 0.0) {
            const double ratio = w[i - 1] * p / q;
            wi = ratio < 1.0 ? ratio : 1.0;  // std::min(1.0, ratio)
          }
          w[i] = wi;
        }
      }
      state.tau = 0;
      state.chunk = -1;
      state.chunk_base = 0;
      state.status = status;
      state.last = -1;
      state.fallback = 0;
      state.passed = 0;
    }
  }
  __syncthreads();

  if (state.status == kChainOk) {
    const int64_t n_draft = state.n_draft;
    // 2. τ = the last i with η_i ≤ h_i: test downwards, stop at the first pass.
    int64_t tau = 0;
    bool residual_ready = false;  // chunk_sums hold row τ's residual
    uint32_t bad_row = kChainOk;  // block-uniform
    for (int64_t i = n_draft; i >= 1; --i) {
      const RandomAddress address{seed, request, step, static_cast<uint32_t>(i), Purpose::kBlockEta,
                                  0};
      const double eta = philox_uniform(address);
      if (i == n_draft) {  // h_{γ_b} = w_{γ_b}: no row needed
        if (eta <= w[i]) {
          tau = i;
          break;
        }
        continue;
      }
      const auto p = target_row(i);  // p_{i+1}, q_{i+1} (rows are 0-based)
      const auto q = draft_row(i);
      double z = 0.0;
      const uint32_t bad = block_row_pass<true>(p, q, w[i], static_cast<float>(w[i]), v, a.n_chunks,
                                                chunk_sums, scratch, &z);
      if (bad != kChainOk) {
        bad_row = bad;
        break;  // block-uniform
      }
      if (threadIdx.x == 0) {
        double h = pass_probability(z, w[i]);
        const double band = h * (static_cast<double>(v) + 16.0) * 0x1p-48;
        if (a.always_serial_z != 0 || (eta - h <= band && h - eta <= band)) {
          // A near-tie: decide with core's serial left-to-right Z_i (core::block_weights).
          double serial = 0.0;
          for (int64_t t = 0; t < v; ++t) serial += z_term(w[i], p(t), q(t));
          h = pass_probability(serial, w[i]);
        }
        state.passed = eta <= h ? 1 : 0;
      }
      __syncthreads();
      const bool passed = state.passed != 0;
      __syncthreads();  // every thread has read state.passed before the next test writes it
      if (passed) {
        tau = i;
        residual_ready = true;
        break;
      }
    }

    // 3. The last token: bonus (τ = γ_b) or the residual at τ, exact fixed-point sampling.
    if (bad_row != kChainOk) {
      if (threadIdx.x == 0) state.status |= bad_row;
    } else {
      if constexpr (kLogits) {
        if (tau == n_draft) {  // the bonus row's statistics
          const void* rows[1] = {logits_row(a.target, r * (g + 1) + tau, v)};
          compute_row_stats(sources, rows, 1, v, true, logits_scratch, tile);
          if (threadIdx.x == 0) target_stats[tau] = logits_scratch->result[0];
          __syncthreads();
        }
      }
      const auto p = target_row(tau);
      const RandomAddress address{seed,
                                  request,
                                  step,
                                  static_cast<uint32_t>(tau + 1),
                                  tau == n_draft ? Purpose::kBonusSample : Purpose::kResidualSample,
                                  0};
      const uint32_t bits = philox_bits(address);
      double unused = 0.0;
      if (tau == n_draft) {
        uint32_t bad = kLogits ? target_stats[tau].status : kChainOk;
        if (bad == kChainOk) {
          bad = block_row_pass<false>(p, p, 1.0, 1.0f, v, a.n_chunks, chunk_sums, scratch, &unused);
        }
        if (bad != kChainOk) {
          if (threadIdx.x == 0) state.status |= bad;
        } else {
          block_locate<false>(p, p, 1.0f, v, a.n_chunks, chunk_sums, bits, scratch, &state);
        }
      } else {
        const auto q = draft_row(tau);
        const float wf = static_cast<float>(w[tau]);
        uint32_t bad = kChainOk;
        if (!residual_ready) {  // τ = 0: nothing passed, row 1 not yet read
          bad = block_row_pass<true>(p, q, w[tau], wf, v, a.n_chunks, chunk_sums, scratch, &unused);
        }
        if (bad != kChainOk) {
          if (threadIdx.x == 0) state.status |= bad;
        } else if (block_locate<true>(p, q, wf, v, a.n_chunks, chunk_sums, bits, scratch, &state) ==
                   0) {
          // Rounding left no residual mass: docs/verifiers.md V5 samples p with the residual's uniform.
          block_row_pass<false>(p, p, 1.0, 1.0f, v, a.n_chunks, chunk_sums, scratch, &unused);
          block_locate<false>(p, p, 1.0f, v, a.n_chunks, chunk_sums, bits, scratch, &state);
          if (threadIdx.x == 0) state.fallback = 1;
        }
      }
      if (threadIdx.x == 0) state.tau = tau;
    }
  }
  __syncthreads();

  // 4. Outputs.
  write_request_outputs(a, r, g, tokens, state.status, state.tau, state.last, state.fallback);
}

}  // namespace speclab::gpu::detail
