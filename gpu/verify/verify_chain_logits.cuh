// Chain verifier kernel V1-V3 on logits with the temperature softmax fused (header
// gpu/verify/verify_chain.hpp, LogitsBatch; the statistics in gpu/sampling/fused_logits.cuh).
// Algorithm and bytes read: gpu/README.md "The verifiers on logits".
#pragma once

#include <cstdint>

#include "core/base/philox.hpp"
#include "core/base/rules.hpp"
#include "gpu/base/simt.cuh"
#include "gpu/sampling/fused_logits.cuh"
#include "gpu/verify/row_stats.cuh"
#include "gpu/verify/verify_chain.cuh"

namespace speclab::gpu::detail {

struct LogitsChainKernelArgs : RequestIo {
  LogitsSource target;  // [B, γ+1, V]
  LogitsSource draft;   // [B, γ, V] (data null for V2)
  int method;           // ChainMethod
  float leniency;       // 1 for V1
};

/// Dynamic shared memory: BlockScratch, RowStatsScratch, the chunk sums.
inline size_t chain_logits_shared_bytes(int64_t n_chunks) {
  return sizeof(BlockScratch) + sizeof(RowStatsScratch) +
         static_cast<size_t>(n_chunks) * sizeof(uint64_t);
}

/// The three parts of that dynamic shared memory, in that order.
struct ChainLogitsShared {
  BlockScratch* scratch;
  RowStatsScratch* logits_scratch;
  uint64_t* chunk_sums;
};
__device__ inline ChainLogitsShared chain_logits_shared(uint64_t* shared) {
  BlockScratch* scratch = reinterpret_cast<BlockScratch*>(shared);
  RowStatsScratch* logits_scratch = reinterpret_cast<RowStatsScratch*>(scratch + 1);
  return {scratch, logits_scratch, reinterpret_cast<uint64_t*>(logits_scratch + 1)};
}

/// Step 1, warp 0: n_draft and the draft tokens of request r, into *state (initialised). Ends with
/// a barrier.
__device__ inline void logits_check_drafts(const LogitsChainKernelArgs& a, int64_t r,
                                           RequestState* state) {
  if (threadIdx.x < kWarpSize) {
    const int lane = static_cast<int>(threadIdx.x);
    int64_t n_draft = 0;
    const uint32_t status =
        check_drafts(a.n_draft, r, a.gamma, a.vocab, a.draft_tokens + r * a.gamma, lane, &n_draft);
    if (lane == 0) start_request_state(state, n_draft, n_draft, status);
  }
  __syncthreads();
}

/// V1/V3 on logits, step 2: positions i = 0, 1, … in order on the statistics of target row i and
/// draft row i (stats_of); thread 0 computes p_i(x_i) and q_i(x_i) from the gathered logits as core
/// and applies lenient_accepts. The first rejection (or bad row) stops, leaving that pair's
/// statistics in stats[0], stats[1]; after γ_b acceptances the bonus row's go to stats[0].
/// Returns n, the accepted count; bad rows go to state->status. Block-uniform; `stats` and
/// `stop_flag` are shared memory.
__device__ inline int64_t logits_accept_tests(const LogitsChainKernelArgs& a,
                                              const RowStatsProvider& stats_of, int64_t r,
                                              const int32_t* tokens, int64_t n_draft,
                                              RequestState* state, LogitsRowStats* stats,
                                              int32_t* stop_flag, RowStatsScratch* logits_scratch) {
  const int64_t g = a.gamma, v = a.vocab;
  const uint32_t request = a.request_ids != nullptr ? a.request_ids[r] : static_cast<uint32_t>(r);
  uint64_t seed = 0;
  uint32_t step = 0;
  launch_seed_step(a, &seed, &step);
  const bool pair_rows[2] = {false, true};  // target row i, draft row i
  int64_t n = n_draft;
  for (int64_t i = 0; i < n_draft; ++i) {
    const int64_t index[2] = {i, i};
    stats_of.stats(2, pair_rows, index, logits_scratch);
    if (threadIdx.x == 0) {
      const LogitsRowStats sp = logits_scratch->result[0], sq = logits_scratch->result[1];
      stats[0] = sp;
      stats[1] = sq;
      const uint32_t bad = sp.status | sq.status;
      int stop = 1;
      if (bad != kChainOk) {
        state->status |= bad;
      } else {
        const int32_t x = tokens[i];
        const float pv = prob_row(a.target, logits_row(a.target, r * (g + 1) + i, v), sp)(x);
        const float qv = prob_row(a.draft, logits_row(a.draft, r * g + i, v), sq)(x);
        const RandomAddress address{
            seed, request, step, static_cast<uint32_t>(i + 1), Purpose::kAcceptTest, 0};
        const bool invalid = !valid_gathered(pv) || !valid_gathered(qv);
        const bool impossible = !invalid && !drafted_from(qv);
        stop =
            invalid || impossible || !lenient_accepts(philox_uniform(address), a.leniency, qv, pv);
        if (invalid) state->status |= kChainBadValue;
        if (impossible) state->status |= kChainImpossibleDraft;
      }
      *stop_flag = stop;
    }
    __syncthreads();
    const bool stop = *stop_flag != 0;
    __syncthreads();  // every thread has read stop_flag before the next test writes it
    if (stop) {
      n = i;
      break;
    }
  }
  if (state->status == kChainOk && n == n_draft) {  // block-uniform: the bonus row
    const int64_t index[1] = {n};
    stats_of.stats(1, pair_rows, index, logits_scratch);
    if (threadIdx.x == 0) {
      stats[0] = logits_scratch->result[0];
      state->status |= stats[0].status;
    }
  }
  __syncthreads();
  return n;
}

/// The row V1/V3 on logits samples from after n acceptances: the bonus row p_{n+1} (n = γ_b) or the
/// residual of p_{n+1} and q_{n+1}, read through the statistics in stats[0], stats[1].
struct LogitsSampledRow {
  bool bonus;
  LogitsProbRow p, q;
  uint32_t bits;
};

__device__ inline LogitsSampledRow logits_sampled_row(const LogitsChainKernelArgs& a, int64_t r,
                                                      int64_t n, int64_t n_draft,
                                                      const LogitsRowStats* stats) {
  const int64_t g = a.gamma, v = a.vocab;
  LogitsSampledRow row{};
  row.bonus = n == n_draft;
  row.p = prob_row(a.target, logits_row(a.target, r * (g + 1) + n, v), stats[0]);
  row.q = row.bonus ? row.p : prob_row(a.draft, logits_row(a.draft, r * g + n, v), stats[1]);
  uint64_t seed = 0;
  uint32_t step = 0;
  launch_seed_step(a, &seed, &step);
  const uint32_t request = a.request_ids != nullptr ? a.request_ids[r] : static_cast<uint32_t>(r);
  const RandomAddress address{seed,
                              request,
                              step,
                              static_cast<uint32_t>(n + 1),
                              row.bonus ? Purpose::kBonusSample : Purpose::kResidualSample,
                              0};
  row.bits = philox_bits(address);
  return row;
}

/// CTAs per request of a rows-parallel launch: every row the request may read (V2: target rows).
__host__ __device__ inline int64_t logits_rows_per_request(int64_t gamma, bool greedy) {
  return greedy ? gamma + 1 : 2 * gamma + 1;
}

/// kRows false: one CTA per request, as above. kRows true (small batches): one CTA per (request r,
/// row j) of logits_rows_per_request, blockIdx.x = r·rows + j; each checks the drafts, reduces its
/// row's statistics into the workspace (rows_phase_stats) and arrives; the last CTA of the request
/// runs steps 2-3 with the statistics read from the workspace instead of reduced one row after
/// another, so its outputs are the one-CTA kernel's (rows past the stop are reduced in vain and
/// their statuses ignored).
template <bool kRows>
__global__ void __launch_bounds__(1024)
    verify_chain_logits_kernel(LogitsChainKernelArgs a, SplitArgs w) {
  SPECLAB_STATIC_SHARED(RequestState, state);
  SPECLAB_STATIC_SHARED(LogitsRowStats[2], stats);  // of the rows in use: target, draft
  SPECLAB_STATIC_SHARED(int32_t, stop_flag);
  SPECLAB_STATIC_SHARED(int32_t, last_row);
  SPECLAB_DYNAMIC_SHARED(uint64_t, shared);
  const auto [scratch, logits_scratch, chunk_sums] = chain_logits_shared(shared);

  const int64_t g = a.gamma, v = a.vocab;
  const bool greedy = a.method == static_cast<int>(ChainMethod::kGreedy);
  const int64_t rows_per_request = logits_rows_per_request(g, greedy);
  const int64_t r = kRows ? blockIdx.x / rows_per_request : blockIdx.x;
  const int32_t* tokens = a.draft_tokens + r * g;

  // 1. Warp 0: n_draft and the draft tokens.
  logits_check_drafts(a, r, &state);
  if constexpr (kRows) {
    rows_phase_stats(a.target, a.draft, w, r, blockIdx.x % rows_per_request, g, v, state.n_draft,
                     state.status == kChainOk, greedy, logits_scratch);
    const uint32_t expected = static_cast<uint32_t>(rows_per_request);
    if (!split_arrive(&w.arrivals[r], expected, &last_row, [] {})) return;  // block-uniform
  }
  if (state.status != kChainOk) {
    write_request_outputs(a, r, g, tokens, state.status, 0, -1, 0);
    return;  // block-uniform
  }
  const int64_t n_draft = state.n_draft;
  const RowStatsProvider stats_of{a.target, a.draft, kRows ? &w : nullptr, r, g, v, !greedy};
  const bool pair_rows[2] = {false, true};  // target row i, draft row i

  if (greedy) {
    // V2: argmax rows in order until the first mismatch (or the bonus position).
    for (int64_t i = 0;; ++i) {
      const int64_t index[1] = {i};
      stats_of.stats(1, pair_rows, index, logits_scratch);
      const LogitsRowStats row_stats = logits_scratch->result[0];
      int32_t best = row_stats.argmax;
      if (row_stats.status == kChainOk) best = stats_of.greedy(i, row_stats, logits_scratch);
      const bool stop = row_stats.status != kChainOk || i == n_draft || tokens[i] != best;
      if (stop && threadIdx.x == 0) {
        state.status |= row_stats.status;
        state.n = i;
        state.last = best;
      }
      if (stop) break;  // block-uniform
    }
  } else {
    // 2. V1/V3: the accept tests in order, each on rows p_i and q_i's statistics.
    const int64_t n = logits_accept_tests(a, stats_of, r, tokens, n_draft, &state, stats,
                                          &stop_flag, logits_scratch);
    if (state.status == kChainOk) {  // block-uniform: written before the last barrier
      // 3. The residual (rejected at n) or the bonus row, computed from the logits on the fly.
      const LogitsSampledRow row = logits_sampled_row(a, r, n, n_draft, stats);
      const uint32_t bad = row.bonus
                               ? weight_pass<false, KernelMutant::kNone>(
                                     row.p, row.q, a.leniency, v, a.n_chunks, chunk_sums, scratch)
                               : weight_pass<true, KernelMutant::kNone>(
                                     row.p, row.q, a.leniency, v, a.n_chunks, chunk_sums, scratch);
      if (bad != kChainOk) {
        if (threadIdx.x == 0) state.status |= bad;
      } else {
        sampled_locate<KernelMutant::kNone>(row.bonus, row.p, row.q, row.bits, a.leniency, v,
                                            a.n_chunks, chunk_sums, scratch, &state);
      }
    }
    if (threadIdx.x == 0) state.n = n;
  }
  __syncthreads();

  // 4. Outputs.
  write_request_outputs(a, r, g, tokens, state.status, state.n, state.last, state.fallback);
}

/// V1/V3 on logits with the sampled row split over S slices (small batches), in two launches on
/// one stream. The first, logits_rows_stats_kernel, is the rows-parallel phase alone: one CTA per
/// (request r, row j) of 2γ+1 reduces row j's statistics into the workspace. The second,
/// verify_chain_logits_split_kernel, runs one CTA per (request r, slice s), blockIdx.x = r·S + s:
/// every slice runs the accept tests on the statistics from the workspace (γ_b lookups and gathers)
/// and then split_sampled_row on the residual or bonus row computed from the logits, as the split
/// kernel on probabilities. The tokens are the one-CTA kernel's for every S.
__global__ void __launch_bounds__(1024)
    logits_rows_stats_kernel(LogitsChainKernelArgs a, SplitArgs w) {
  SPECLAB_STATIC_SHARED(RequestState, state);
  SPECLAB_DYNAMIC_SHARED(uint64_t, shared);
  RowStatsScratch* logits_scratch = chain_logits_shared(shared).logits_scratch;
  const bool greedy = a.method == static_cast<int>(ChainMethod::kGreedy);
  const int64_t rows_per_request = logits_rows_per_request(a.gamma, greedy);
  const int64_t r = blockIdx.x / rows_per_request;
  logits_check_drafts(a, r, &state);
  rows_phase_stats(a.target, a.draft, w, r, blockIdx.x % rows_per_request, a.gamma, a.vocab,
                   state.n_draft, state.status == kChainOk, greedy, logits_scratch);
}

__global__ void __launch_bounds__(1024)
    verify_chain_logits_split_kernel(LogitsChainKernelArgs a, SplitArgs w) {
  SPECLAB_STATIC_SHARED(RequestState, state);
  SPECLAB_STATIC_SHARED(LogitsRowStats[2], stats);  // of the rows in use: target, draft
  SPECLAB_STATIC_SHARED(int32_t, stop_flag);
  SPECLAB_STATIC_SHARED(int32_t, last_slice);
  SPECLAB_DYNAMIC_SHARED(uint64_t, shared);
  const auto [scratch, logits_scratch, chunk_sums] = chain_logits_shared(shared);
  const int64_t g = a.gamma;
  const int64_t r = blockIdx.x / w.slices;
  const int s = static_cast<int>(blockIdx.x % w.slices);
  const int32_t* tokens = a.draft_tokens + r * g;
  logits_check_drafts(a, r, &state);
  const int64_t n_draft = state.n_draft;
  int64_t n = 0;
  if (state.status == kChainOk) {  // block-uniform
    const RowStatsProvider stats_of{a.target, a.draft, &w, r, g, a.vocab, true};
    n = logits_accept_tests(a, stats_of, r, tokens, n_draft, &state, stats, &stop_flag,
                            logits_scratch);
  }
  const LogitsSampledRow row = logits_sampled_row(a, r, n, n_draft, stats);
  if (!split_sampled_row<KernelMutant::kNone>(row.bonus, row.p, row.q, row.bits, a.leniency,
                                              a.vocab, a.n_chunks, w, r, s, chunk_sums, scratch,
                                              &state, &last_slice)) {
    return;  // block-uniform
  }
  write_request_outputs(a, r, g, tokens, state.status, n, state.last, state.fallback);
}

/// Test hook (gpu::fused_logits_rows): one CTA per row, the statistics, every p(t) as the
/// verifiers compute it, and the V2 token. Dynamic shared memory: logits_shared_bytes().
__global__ void __launch_bounds__(1024)
    fused_rows_kernel(LogitsSource source, int64_t vocab, float* probs, int32_t* greedy,
                      uint32_t* status) {
  SPECLAB_DYNAMIC_SHARED(uint64_t, shared);
  RowStatsScratch* scratch = reinterpret_cast<RowStatsScratch*>(shared);
  const int64_t row = blockIdx.x;
  const void* rows[1] = {logits_row(source, row, vocab)};
  compute_row_stats(&source, rows, 1, vocab, true, scratch);
  const LogitsRowStats stats = scratch->result[0];
  const LogitsProbRow p = prob_row(source, rows[0], stats);
  int32_t token = -1;
  if (stats.status == kChainOk) token = greedy_token(p, stats, vocab, scratch);  // block-uniform
  for (int64_t t = threadIdx.x; t < vocab; t += blockDim.x) {
    probs[row * vocab + t] = stats.status == kChainOk ? p(t) : 0.0f;
  }
  if (threadIdx.x == 0) {
    greedy[row] = token;
    status[row] = stats.status;
  }
}

}  // namespace speclab::gpu::detail
