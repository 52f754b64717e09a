// Block verification kernel, docs/verifiers.md V5 (header gpu/verify/verify_block.hpp), one CTA
// per request: w in warp 0, the downward tests with a parallel Z_i, the residual or bonus row by
// the exact locate. Algorithm and bytes read: gpu/README.md "gpu::verify_block"; the near-tie
// re-decision that keeps every decision core's: proofs/gpu_kernels.md §1.
#pragma once

#include <cstdint>

#include "core/base/philox.hpp"
#include "core/base/rules.hpp"
#include "gpu/base/simt.cuh"
#include "gpu/sampling/fused_logits.cuh"
#include "gpu/verify/row_stats.cuh"
#include "gpu/verify/verify_block.hpp"
#include "gpu/verify/verify_chain.cuh"

namespace speclab::gpu::detail {

struct BlockKernelArgs : RequestIo {
  const float* probs_target;  // [B, γ+1, V] (probability kernel)
  const float* probs_draft;   // [B, γ, V] (probability kernel)
  LogitsSource target;        // [B, γ+1, V] (logits kernel)
  LogitsSource draft;         // [B, γ, V] (logits kernel)
  int always_serial_z;
};

struct BlockRequestState {
  int64_t n_draft;
  int64_t tau;
  int64_t chunk;
  uint64_t chunk_base;
  uint32_t status;
  int32_t last;
  int32_t fallback;
  int32_t passed;    // the last test's decision
  uint32_t bad_row;  // split launch: the status bits of the row the tests stopped at
};

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

/// A thread's share of a V5 row pass: the row checks and the Z terms, in double.
struct BlockRowChecks {
  double sum_p = 0.0, sum_q = 0.0, z = 0.0;
  int invalid = 0;
};

/// Chunks [c_begin, c_end) of row p (and q when kResidual): warps stride over them, and each
/// chunk's fixed-point sum of the residual weights block_residual_fixed(wf, p, q) (or to_fixed(p))
/// goes to chunk_sums[c] (lane 0); the Z terms max(0, w·p − q) (kResidual) and the row checks go
/// into the thread's *checks. No barrier. P and Q are row accessors (ProbRowRef or LogitsProbRow).
template <bool kResidual, class P, class Q>
__device__ void block_chunk_range_pass(const P& p, const Q& q, double w, float wf, int64_t vocab,
                                       int64_t c_begin, int64_t c_end, uint64_t* chunk_sums,
                                       BlockRowChecks* checks) {
  const int lane = static_cast<int>(threadIdx.x) % kWarpSize;
  const int warp = static_cast<int>(threadIdx.x) / kWarpSize;
  const int n_warps = static_cast<int>(blockDim.x) / kWarpSize;
  for (int64_t c = c_begin + warp; c < c_end; c += n_warps) {
    uint64_t s = 0;
    const int64_t first = c * kChunkTokens + lane;
    for (int k = 0; k < kLaneTokens; ++k) {
      const int64_t t = first + static_cast<int64_t>(k) * kWarpSize;
      if (t < vocab) {
        const float pv = p(t);
        checks->invalid |= !valid_probability(pv);
        checks->sum_p += pv;
        if constexpr (kResidual) {
          const float qv = q(t);
          checks->invalid |= !valid_probability(qv);
          checks->sum_q += qv;
          s += block_residual_fixed(wf, pv, qv);
          checks->z += z_term(w, pv, qv);
        } else {
          s += to_fixed(pv);
        }
      }
    }
    s = warp_sum<KernelMutant::kNone>(s);
    if (lane == 0) chunk_sums[c] = s;
  }
}

/// The block's totals of its threads' checks, broadcast to every thread (barriers: also makes
/// the chunk sums of block_chunk_range_pass visible to the block).
template <bool kResidual>
__device__ void block_reduce_checks(BlockRowChecks* checks, BlockScratch* scratch) {
  checks->invalid = __syncthreads_or(checks->invalid);
  block_sum2(&checks->sum_p, &checks->sum_q, scratch);
  if constexpr (kResidual) {
    double unused = 0.0;
    block_sum2(&checks->z, &unused, scratch);
  }
}

/// One pass over row p (and q when kResidual): block_chunk_range_pass over every chunk and the
/// block's totals. Returns block-uniform status bits; *z gets the block-uniform Z.
template <bool kResidual, class P, class Q>
__device__ uint32_t block_row_pass(const P& p, const Q& q, double w, float wf, int64_t vocab,
                                   int64_t n_chunks, uint64_t* chunk_sums, BlockScratch* scratch,
                                   double* z) {
  BlockRowChecks checks;
  block_chunk_range_pass<kResidual>(p, q, w, wf, vocab, 0, n_chunks, chunk_sums, &checks);
  block_reduce_checks<kResidual>(&checks, scratch);
  *z = checks.z;
  return row_check_status<kResidual>(checks.invalid, checks.sum_p, checks.sum_q);
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
      [&](int64_t t) { return kResidual ? block_residual_fixed(wf, p(t), q(t)) : to_fixed(p(t)); },
      vocab, n_chunks, chunk_sums, bits, scratch, state);
}

/// Dynamic shared memory: BlockScratch, w[γ+1] (double), chunk_sums[n_chunks], the gathered
/// p_i(x_i), q_i(x_i) as float[γ] each; with kLogits then (8-byte aligned) RowStatsScratch, the row
/// statistics of target rows [γ+1] and draft rows [γ].
SPECLAB_HD inline size_t block_gathered_end(int64_t gamma, int64_t n_chunks) {
  return sizeof(BlockScratch) + static_cast<size_t>(gamma + 1) * sizeof(double) +
         static_cast<size_t>(n_chunks) * sizeof(uint64_t) +
         2 * static_cast<size_t>(gamma) * sizeof(float);
}

inline size_t block_shared_bytes(int64_t gamma, int64_t n_chunks, bool logits = false) {
  if (!logits) return block_gathered_end(gamma, n_chunks);
  const size_t aligned = (block_gathered_end(gamma, n_chunks) + 7) / 8 * 8;
  return aligned + sizeof(RowStatsScratch) +
         static_cast<size_t>(2 * gamma + 1) * sizeof(LogitsRowStats);
}

/// The request's pieces of dynamic shared memory (layout: block_shared_bytes). The logits
/// pointers lie past the end for the probability kernel, which never uses them.
struct BlockShared {
  BlockScratch* scratch;
  double* w;             // [γ+1]
  uint64_t* chunk_sums;  // [n_chunks]
  float* gathered_p;     // [γ] p_i(x_i)
  float* gathered_q;     // [γ] q_i(x_i)
  RowStatsScratch* logits_scratch;
  LogitsRowStats* target_stats;  // [γ+1]
  LogitsRowStats* draft_stats;   // [γ]
};

__device__ inline BlockShared block_shared(uint64_t* shared, int64_t g, int64_t n_chunks) {
  BlockShared m;
  m.scratch = reinterpret_cast<BlockScratch*>(shared);
  m.w = reinterpret_cast<double*>(shared + sizeof(BlockScratch) / sizeof(uint64_t));
  m.chunk_sums = reinterpret_cast<uint64_t*>(m.w + g + 1);
  m.gathered_p = reinterpret_cast<float*>(m.chunk_sums + n_chunks);
  m.gathered_q = m.gathered_p + g;
  const size_t logits_offset = (block_gathered_end(g, n_chunks) + 7) / 8 * 8;
  m.logits_scratch =
      reinterpret_cast<RowStatsScratch*>(reinterpret_cast<unsigned char*>(shared) + logits_offset);
  m.target_stats = reinterpret_cast<LogitsRowStats*>(m.logits_scratch + 1);
  m.draft_stats = m.target_stats + g + 1;
  return m;
}

/// Row i (0-based) of request r's p and q as accessors: a probability row in memory, or a logits
/// row read through the fused softmax with its statistics from shared memory (as they are when
/// the accessor is made).
template <bool kLogits>
struct BlockRows {
  const BlockKernelArgs& a;
  int64_t r;
  const BlockShared& sm;

  __device__ auto target(int64_t i) const {
    const int64_t g = a.gamma, v = a.vocab;
    if constexpr (kLogits) {
      return prob_row(a.target, logits_row(a.target, r * (g + 1) + i, v), sm.target_stats[i]);
    } else {
      return ProbRowRef{a.probs_target + (r * (g + 1) + i) * v};
    }
  }
  __device__ auto draft(int64_t i) const {
    const int64_t g = a.gamma, v = a.vocab;
    if constexpr (kLogits) {
      return prob_row(a.draft, logits_row(a.draft, r * g + i, v), sm.draft_stats[i]);
    } else {
      return ProbRowRef{a.probs_draft + (r * g + i) * v};
    }
  }
};

/// Step 1, warp 0: n_draft and the draft tokens, into state->n_draft and state->status.
__device__ inline void block_check_drafts(const BlockKernelArgs& a, int64_t r,
                                          BlockRequestState* state) {
  if (threadIdx.x < kWarpSize) {
    const int lane = static_cast<int>(threadIdx.x) % kWarpSize;
    int64_t n_draft = 0;
    const uint32_t status =
        check_drafts(a.n_draft, r, a.gamma, a.vocab, a.draft_tokens + r * a.gamma, lane, &n_draft);
    if (lane == 0) {
      state->n_draft = n_draft;
      state->status = status;
    }
  }
  __syncthreads();
}

/// The logits kernel's statistics of rows 1..γ_b of p and q, a pair at a time, until a bad row
/// (reduced by the block, or read from a rows-parallel launch's workspace: stats_of).
__device__ inline void block_pair_stats(const RowStatsProvider& stats_of, const BlockShared& sm,
                                        BlockRequestState* state) {
  const int64_t n_draft = state->status == kChainOk ? state->n_draft : 0;
  const bool pair_rows[2] = {false, true};
  for (int64_t i = 0; i < n_draft; ++i) {
    const int64_t index[2] = {i, i};
    stats_of.stats(2, pair_rows, index, sm.logits_scratch);
    if (threadIdx.x == 0) {
      sm.target_stats[i] = sm.logits_scratch->result[0];
      sm.draft_stats[i] = sm.logits_scratch->result[1];
      state->status |= sm.target_stats[i].status | sm.draft_stats[i].status;
    }
    __syncthreads();
    const bool bad = state->status != kChainOk;
    __syncthreads();  // read before the next pair may write it
    if (bad) break;
  }
  __syncthreads();  // state->status was read above (also when no pair ran); warp 0 writes it next
}

/// w_0..w_n from the gathered p_i(x_i), q_i(x_i): core::block_weights, operation for operation.
__device__ inline void weights_from_gathered(double* w, const float* gathered_p,
                                             const float* gathered_q, int64_t n) {
  w[0] = 1.0;
  for (int64_t i = 1; i <= n; ++i) {
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

/// Step 2's start, warp 0: the gathered values (a ballot of bad ones) and w (lane 0, core's
/// order); lane 0 also resets the rest of the state for the tests.
template <bool kLogits>
__device__ void block_gather_weights(const BlockRows<kLogits>& rows, const int32_t* tokens,
                                     const BlockShared& sm, BlockRequestState* state) {
  if (threadIdx.x < kWarpSize) {
    const int lane = static_cast<int>(threadIdx.x) % kWarpSize;
    const int64_t n_draft = state->n_draft;
    uint32_t status = state->status;
    if (status == kChainOk) {
      int invalid = 0, impossible = 0;
      for (int64_t i = lane; i < n_draft; i += kWarpSize) {
        const int32_t x = tokens[i];
        const float pv = rows.target(i)(x), qv = rows.draft(i)(x);
        const bool bad_value = !valid_gathered(pv) || !valid_gathered(qv);
        invalid |= bad_value;
        impossible |= !bad_value && !drafted_from(qv);
        sm.gathered_p[i] = pv;
        sm.gathered_q[i] = qv;
      }
      if (__any_sync(kFullMask, invalid)) status |= kChainBadValue;
      if (__any_sync(kFullMask, impossible)) status |= kChainImpossibleDraft;
    }
    __syncwarp(kFullMask);
    if (lane == 0) {
      weights_from_gathered(sm.w, sm.gathered_p, sm.gathered_q, status == kChainOk ? n_draft : 0);
      state->tau = 0;
      state->chunk = -1;
      state->chunk_base = 0;
      state->status = status;
      state->last = -1;
      state->fallback = 0;
      state->passed = 0;
    }
  }
  __syncthreads();
}

/// Thread 0's decision of test i: η ≤ h_i, with h_i from the block's Z_i unless η is within
/// rounding of it, where core's serial left-to-right Z_i decides (core::block_weights).
template <class P, class Q>
__device__ bool block_test_passes(double eta, double z, double w, const P& p, const Q& q,
                                  int64_t vocab, bool always_serial_z) {
  double h = pass_probability(z, w);
  const double band = h * (static_cast<double>(vocab) + 16.0) * 0x1p-48;
  if (always_serial_z || (eta - h <= band && h - eta <= band)) {
    double serial = 0.0;
    for (int64_t t = 0; t < vocab; ++t) serial += z_term(w, p(t), q(t));
    h = pass_probability(serial, w);
  }
  return eta <= h;
}

/// Where the downward tests stopped. Block-uniform.
struct BlockTauSearch {
  int64_t tau = 0;
  bool weights_ready = false;  // chunk_sums hold row τ's sampling weights (residual or bonus)
  uint32_t bad_row = kChainOk;
};

/// η_i, the uniform of test i.
__device__ inline double block_eta(const RandomAddress& base, int64_t i) {
  const RandomAddress address{
      base.seed, base.request, base.step, static_cast<uint32_t>(i), Purpose::kBlockEta, 0};
  return philox_uniform(address);
}

/// Whether the first test (i = γ_b, against h = w_{γ_b}, no row) passes, or there is none: τ = γ_b.
__device__ inline bool block_top_test_passes(const RandomAddress& base, const double* w,
                                             int64_t n_draft) {
  return n_draft == 0 || block_eta(base, n_draft) <= w[n_draft];
}

/// Step 2: τ = the last i with η_i ≤ h_i, testing i = γ_b, γ_b − 1, …, 1 and stopping at the
/// first pass; i = γ_b against h = w_{γ_b} needs no row.
template <bool kLogits>
__device__ BlockTauSearch block_find_tau(const BlockKernelArgs& a, const BlockRows<kLogits>& rows,
                                         const BlockShared& sm, const RandomAddress& base,
                                         BlockRequestState* state) {
  const int64_t n_draft = state->n_draft;
  BlockTauSearch found;
  if (block_top_test_passes(base, sm.w, n_draft)) {
    found.tau = n_draft;
    return found;
  }
  for (int64_t i = n_draft - 1; i >= 1; --i) {
    const double eta = block_eta(base, i);
    const auto p = rows.target(i);  // p_{i+1}, q_{i+1} (rows are 0-based)
    const auto q = rows.draft(i);
    double z = 0.0;
    const uint32_t bad = block_row_pass<true>(p, q, sm.w[i], static_cast<float>(sm.w[i]), a.vocab,
                                              a.n_chunks, sm.chunk_sums, sm.scratch, &z);
    if (bad != kChainOk) {
      found.bad_row = bad;
      break;  // block-uniform
    }
    if (threadIdx.x == 0) {
      state->passed = block_test_passes(eta, z, sm.w[i], p, q, a.vocab, a.always_serial_z != 0);
    }
    __syncthreads();
    const bool passed = state->passed != 0;
    __syncthreads();  // every thread has read state->passed before the next test writes it
    if (passed) {
      found.tau = i;
      found.weights_ready = true;
      break;
    }
  }
  return found;
}

/// The bonus token from row p (status `bad` from its statistics), by exact fixed-point sampling;
/// its chunk sums are built unless `weights_ready` (a split launch built them).
template <class P>
__device__ void block_sample_bonus(const P& p, uint32_t bad, bool weights_ready, int64_t vocab,
                                   int64_t n_chunks, const BlockShared& sm, uint32_t bits,
                                   BlockRequestState* state) {
  double unused = 0.0;
  if (bad == kChainOk && !weights_ready) {
    bad =
        block_row_pass<false>(p, p, 1.0, 1.0f, vocab, n_chunks, sm.chunk_sums, sm.scratch, &unused);
  }
  if (bad != kChainOk) {
    if (threadIdx.x == 0) state->status |= bad;
  } else {
    block_locate<false>(p, p, 1.0f, vocab, n_chunks, sm.chunk_sums, bits, sm.scratch, state);
  }
}

/// The residual token at τ with weight w = w_τ. Its chunk sums are built unless the test that
/// passed (or a split launch) left them (τ = 0: nothing passed, row 1 not yet read); a residual
/// that rounding left
/// without mass falls back to p (docs/verifiers.md V5, with the residual's uniform).
template <class P, class Q>
__device__ void block_sample_residual(const P& p, const Q& q, double w, bool weights_ready,
                                      int64_t vocab, int64_t n_chunks, const BlockShared& sm,
                                      uint32_t bits, BlockRequestState* state) {
  const float wf = static_cast<float>(w);
  double unused = 0.0;
  uint32_t bad = kChainOk;
  if (!weights_ready) {
    bad = block_row_pass<true>(p, q, w, wf, vocab, n_chunks, sm.chunk_sums, sm.scratch, &unused);
  }
  if (bad != kChainOk) {
    if (threadIdx.x == 0) state->status |= bad;
  } else if (block_locate<true>(p, q, wf, vocab, n_chunks, sm.chunk_sums, bits, sm.scratch,
                                state) == 0) {
    block_row_pass<false>(p, p, 1.0, 1.0f, vocab, n_chunks, sm.chunk_sums, sm.scratch, &unused);
    block_locate<false>(p, p, 1.0f, vocab, n_chunks, sm.chunk_sums, bits, sm.scratch, state);
    if (threadIdx.x == 0) state->fallback = 1;
  }
}

/// Step 3: the last token, the bonus (τ = γ_b) or the residual at τ; or the bad row's status.
template <bool kLogits>
__device__ void block_sample_last(const BlockKernelArgs& a, const BlockRows<kLogits>& rows,
                                  const BlockShared& sm, const BlockTauSearch& found,
                                  const RandomAddress& base, const RowStatsProvider& stats_of,
                                  BlockRequestState* state) {
  if (found.bad_row != kChainOk) {  // block-uniform
    if (threadIdx.x == 0) state->status |= found.bad_row;
    return;
  }
  const int64_t tau = found.tau, n_draft = state->n_draft, v = a.vocab;
  if constexpr (kLogits) {
    if (tau == n_draft) {  // the bonus row's statistics
      const bool target_row[1] = {false};
      const int64_t index[1] = {tau};
      stats_of.stats(1, target_row, index, sm.logits_scratch);
      if (threadIdx.x == 0) sm.target_stats[tau] = sm.logits_scratch->result[0];
      __syncthreads();
    }
  }
  const auto p = rows.target(tau);
  const RandomAddress address{base.seed,
                              base.request,
                              base.step,
                              static_cast<uint32_t>(tau + 1),
                              tau == n_draft ? Purpose::kBonusSample : Purpose::kResidualSample,
                              0};
  const uint32_t bits = philox_bits(address);
  if (tau == n_draft) {
    const uint32_t bad = kLogits ? sm.target_stats[tau].status : kChainOk;
    block_sample_bonus(p, bad, found.weights_ready, v, a.n_chunks, sm, bits, state);
  } else {
    block_sample_residual(p, rows.draft(tau), sm.w[tau], found.weights_ready, v, a.n_chunks, sm,
                          bits, state);
  }
  if (threadIdx.x == 0) state->tau = tau;
}

/// Request r's Philox address; position and purpose are set per draw.
__device__ inline RandomAddress block_random_base(const BlockKernelArgs& a, int64_t r) {
  RandomAddress base{};
  base.request = a.request_ids != nullptr ? a.request_ids[r] : static_cast<uint32_t>(r);
  launch_seed_step(a, &base.seed, &base.step);
  return base;
}

/// V5 on probability rows (kLogits false) or on logits rows with the fused softmax (kLogits
/// true): the same steps; the logits kernel first reduces rows 1..γ_b of p and q (statistics in
/// shared memory) and reads every row through LogitsProbRow. Every helper is entered by the
/// whole block, so their barriers are reached by every thread.
///
/// kRows (logits only, small batches): one CTA per (request r, row j) of 2γ+1, blockIdx.x =
/// r·(2γ+1) + j; each checks the drafts, reduces its row's statistics into the workspace
/// (rows_phase_stats) and arrives; the last CTA of the request runs the steps with the statistics
/// read from the workspace instead of reduced one pair after another (the outputs are the one-CTA
/// kernel's: rows past the stop are reduced in vain and their statuses ignored).
template <bool kLogits, bool kRows = false>
__global__ void __launch_bounds__(1024) verify_block_kernel(BlockKernelArgs a, SplitArgs w) {
  static_assert(kLogits || !kRows, "rows in parallel are the logits kernel's row statistics");
  SPECLAB_STATIC_SHARED(BlockRequestState, state);
  SPECLAB_STATIC_SHARED(int32_t, last_row);
  SPECLAB_DYNAMIC_SHARED(uint64_t, shared);
  const int64_t g = a.gamma;
  const int64_t r = kRows ? blockIdx.x / (2 * g + 1) : blockIdx.x;
  const BlockShared sm = block_shared(shared, g, a.n_chunks);
  const BlockRows<kLogits> rows{a, r, sm};
  const int32_t* tokens = a.draft_tokens + r * g;
  const RandomAddress base = block_random_base(a, r);
  const RowStatsProvider stats_of{a.target, a.draft, kRows ? &w : nullptr, r, g, a.vocab, true};

  block_check_drafts(a, r, &state);
  if constexpr (kRows) {
    rows_phase_stats(a.target, a.draft, w, r, blockIdx.x % (2 * g + 1), g, a.vocab, state.n_draft,
                     state.status == kChainOk, false, sm.logits_scratch);
    const uint32_t expected = static_cast<uint32_t>(2 * g + 1);
    if (!split_arrive(&w.arrivals[r], expected, &last_row, [] {})) return;  // block-uniform
  }
  if constexpr (kLogits) block_pair_stats(stats_of, sm, &state);
  block_gather_weights(rows, tokens, sm, &state);
  if (state.status ==
      kChainOk) {  // block-uniform: read after the barrier that ended step 2's start
    const BlockTauSearch found = block_find_tau(a, rows, sm, base, &state);
    block_sample_last(a, rows, sm, found, base, stats_of, &state);
  }
  __syncthreads();

  // 4. Outputs.
  write_request_outputs(a, r, g, tokens, state.status, state.tau, state.last, state.fallback);
}

/// Thread 0 of the last CTA of a split request: block_find_tau's downward tests on the rows'
/// totals, which warp 0 reduced from their slice partials into each row's slice-0 partial (rows
/// below the stop were read but their checks are ignored, as the one-CTA kernel never reads them).
/// `partials` is the request's [γ+1, S]; the rows' chunk sums are all built (weights_ready).
__device__ inline BlockTauSearch block_split_tau(const BlockKernelArgs& a,
                                                 const BlockRows<false>& rows,
                                                 const BlockShared& sm, const RandomAddress& base,
                                                 const SlicePartial* partials, int slices,
                                                 bool top_passes, int64_t n_draft) {
  BlockTauSearch found;
  found.weights_ready = true;
  const auto row_status = [&](int64_t j, bool residual, SlicePartial* total) {
    *total = partials[j * slices];  // the row's total, left in its slice-0 partial by warp 0
    const int invalid = static_cast<int>(total->invalid);
    return residual ? row_check_status<true>(invalid, total->sum_p, total->sum_q)
                    : row_check_status<false>(invalid, total->sum_p, total->sum_q);
  };
  SlicePartial total{};
  if (top_passes) {  // the bonus row γ_b
    found.tau = n_draft;
    found.bad_row = row_status(n_draft, false, &total);
    return found;
  }
  for (int64_t i = n_draft - 1; i >= 1; --i) {
    found.bad_row = row_status(i, true, &total);
    if (found.bad_row != kChainOk) return found;
    if (block_test_passes(block_eta(base, i), total.z, sm.w[i], rows.target(i), rows.draft(i),
                          a.vocab, a.always_serial_z != 0)) {
      found.tau = i;
      return found;
    }
  }
  found.tau = 0;  // nothing passed: the residual of row 1 with w_0 = 1
  found.bad_row = row_status(0, true, &total);
  return found;
}

/// Steps 1-2 of verify_block_split_kernel for CTA (r, j, s), then the arrival: whether this CTA
/// is the request's last (block-uniform). Leaves the checks' state and w in shared memory.
__device__ inline bool block_split_slice(const BlockKernelArgs& a, const SplitArgs& w,
                                         uint64_t* shared, BlockRequestState* state,
                                         int32_t* last_cta) {
  const int64_t g = a.gamma, v = a.vocab;
  const int64_t r = blockIdx.x / ((g + 1) * w.slices);
  const int64_t j = (blockIdx.x / w.slices) % (g + 1);
  const int s = static_cast<int>(blockIdx.x % w.slices);
  const BlockShared sm = block_shared(shared, g, a.n_chunks);
  const BlockRows<false> rows{a, r, sm};
  block_check_drafts(a, r, state);
  block_gather_weights(rows, a.draft_tokens + r * g, sm, state);
  const int64_t n_draft = state->n_draft;
  const bool ok = state->status == kChainOk;  // block-uniform
  const bool top_passes = ok && block_top_test_passes(block_random_base(a, r), sm.w, n_draft);
  BlockRowChecks checks;
  if (ok && (top_passes ? j == n_draft : j < n_draft)) {
    int64_t begin = 0, end = 0;
    slice_chunk_range(w, a.n_chunks, s, &begin, &end);
    uint64_t* row_chunks = w.chunk_sums + (r * (g + 1) + j) * a.n_chunks;
    const auto p = rows.target(j);
    if (j == n_draft) {
      block_chunk_range_pass<false>(p, p, 1.0, 1.0f, v, begin, end, row_chunks, &checks);
    } else {
      block_chunk_range_pass<true>(p, rows.draft(j), sm.w[j], static_cast<float>(sm.w[j]), v, begin,
                                   end, row_chunks, &checks);
    }
  }
  block_reduce_checks<true>(&checks, sm.scratch);
  const uint32_t expected = static_cast<uint32_t>((g + 1) * w.slices);
  return split_arrive(&w.arrivals[r], expected, last_cta, [&] {
    SlicePartial& partial = w.partials[(r * (g + 1) + j) * w.slices + s];
    partial.sum_p = checks.sum_p;
    partial.sum_q = checks.sum_q;
    partial.z = checks.z;
    partial.invalid = static_cast<uint32_t>(checks.invalid);
  });
}

/// V5 on probabilities with every row of a request split over S slices, for batches too small to
/// fill the device: one CTA per (request r, row j ≤ γ, slice s), blockIdx.x = (r·(γ+1) + j)·S + s.
///  1. every CTA checks the drafts, gathers p_i(x_i), q_i(x_i) and forms w (as the one-CTA kernel),
///     and draws the first test (i = γ_b against w_{γ_b}, no row);
///  2. if it passes (τ = γ_b) only the bonus row j = γ_b is needed, otherwise rows j < γ_b (row j
///     is test j's Z_j and the residual at τ = j, with w_j; row 0 the residual at τ = 0): slice s
///     of the row writes its chunks' exact fixed-point sums to the workspace and its partial of the
///     row checks and of Z_j;
///  3. the last CTA of the request to arrive (split_arrive, which resets the counter) runs the
///     downward tests on the partials reduced by warp 0 in a fixed order (near-ties re-decided by
///     core's serial Z_i, as the one-CTA kernel), copies row τ's chunk sums to shared memory and
///     samples.
/// Integer chunk sums and slice-order partials make the tokens independent of S and of which CTA
/// is last; Z_i differs from the one-CTA kernel's only in summation order, which the near-tie
/// band covers. Step 3 recomputes what it needs rather than keeping step 2's values live.
__global__ void __launch_bounds__(1024) verify_block_split_kernel(BlockKernelArgs a, SplitArgs w) {
  SPECLAB_STATIC_SHARED(BlockRequestState, state);
  SPECLAB_STATIC_SHARED(int32_t, last_cta);
  SPECLAB_DYNAMIC_SHARED(uint64_t, shared);
  if (!block_split_slice(a, w, shared, &state, &last_cta)) return;  // block-uniform

  const int64_t g = a.gamma;
  const int64_t r = blockIdx.x / ((g + 1) * w.slices);
  const BlockShared sm = block_shared(shared, g, a.n_chunks);
  if (state.status == kChainOk) {  // block-uniform
    const int64_t n_draft = state.n_draft;
    const bool top_passes = block_top_test_passes(block_random_base(a, r), sm.w, n_draft);
    SlicePartial* partials = w.partials + r * (g + 1) * w.slices;
    // Warp 0 reduces the slice partials of every row the tests may read (the rows the slices
    // wrote) and leaves each total in the row's slice-0 partial, which only this CTA reads now.
    if (threadIdx.x < kWarpSize) {
      const int64_t first = top_passes ? n_draft : 0, last = top_passes ? n_draft : n_draft - 1;
      for (int64_t j = first; j <= last; ++j) {
        const SlicePartial total = warp_reduce_slice_partials(partials + j * w.slices, w.slices);
        if (threadIdx.x == 0) partials[j * w.slices] = total;  // lane 0 alone read slice 0
      }
    }
    __syncthreads();
    const BlockRows<false> rows{a, r, sm};
    const RandomAddress base = block_random_base(a, r);
    if (threadIdx.x == 0) {
      const BlockTauSearch found =
          block_split_tau(a, rows, sm, base, partials, w.slices, top_passes, n_draft);
      state.tau = found.tau;
      state.bad_row = found.bad_row;
    }
    __syncthreads();
    BlockTauSearch found;
    found.tau = state.tau;
    found.weights_ready = true;
    found.bad_row = state.bad_row;
    load_chunk_sums(sm.chunk_sums, w.chunk_sums + (r * (g + 1) + found.tau) * a.n_chunks,
                    a.n_chunks);
    __syncthreads();
    block_sample_last(a, rows, sm, found, base, RowStatsProvider{}, &state);
  }
  __syncthreads();
  write_request_outputs(a, r, g, a.draft_tokens + r * g, state.status, state.tau, state.last,
                        state.fallback);
}

}  // namespace speclab::gpu::detail
