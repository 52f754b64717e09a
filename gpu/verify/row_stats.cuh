// The logits rows' statistics as the verifiers read them: computed by the verifying CTA, or by
// CTAs in parallel (one per row) into the workspace when the batch is too small to fill the
// device, then read back by the request's last CTA. The statistics are gpu/sampling/fused_logits's.
#pragma once

#include <cstdint>

#include "gpu/base/device.cuh"
#include "gpu/sampling/fused_logits.cuh"
#include "gpu/verify/verify_chain.cuh"

namespace speclab::gpu::detail {

/// One logits row's statistics in a rows-parallel launch's workspace (SplitArgs::row_stats,
/// request r's [2γ+1]: target rows 0..γ, then draft rows 0..γ−1), with its V2 token.
struct RowStatsSlot {
  LogitsRowStats stats;
  int32_t greedy_token;  // V2 launches: greedy_token of the row
  uint32_t reserved;
};
static_assert(sizeof(RowStatsSlot) <= kRowStatsSlotBytes);

/// The slot of target row i (draft false) or draft row i of request r (γ = gamma).
__device__ inline RowStatsSlot* row_stats_slot(const SplitArgs& w, int64_t r, int64_t gamma,
                                               bool draft, int64_t i) {
  const int64_t index = r * (2 * gamma + 1) + (draft ? gamma + 1 + i : i);
  return reinterpret_cast<RowStatsSlot*>(w.row_stats + index * kRowStatsSlotBytes);
}

/// The rows-parallel phase, CTA (r, row j) of 2γ+1 (V2: γ+1): j ≤ γ is target row j, j > γ draft
/// row j − γ − 1. Computes the row's statistics (and with `greedy` its V2 token) into its slot
/// when the request's checks passed (`ok`) and the row is one the request may read (target rows
/// ≤ γ_b, draft rows < γ_b); the caller then arrives (split_arrive). Block-uniform.
__device__ inline void rows_phase_stats(const LogitsSource& target, const LogitsSource& draft,
                                        const SplitArgs& w, int64_t r, int64_t j, int64_t gamma,
                                        int64_t vocab, int64_t n_draft, bool ok, bool greedy,
                                        RowStatsScratch* scratch) {
  const bool is_draft = j > gamma;
  const int64_t i = is_draft ? j - gamma - 1 : j;
  if (!ok || (is_draft ? i >= n_draft : i > n_draft)) return;
  const LogitsSource& source = is_draft ? draft : target;
  const void* rows[1] = {logits_row(source, is_draft ? r * gamma + i : r * (gamma + 1) + i, vocab)};
  compute_row_stats(&source, rows, 1, vocab, !greedy, scratch);
  const LogitsRowStats stats = scratch->result[0];
  int32_t token = stats.argmax;
  if (greedy && stats.status == kChainOk) {
    token = greedy_token(prob_row(source, rows[0], stats), stats, vocab, scratch);
  }
  if (threadIdx.x == 0) {
    RowStatsSlot* slot = row_stats_slot(w, r, gamma, is_draft, i);
    slot->stats = stats;
    slot->greedy_token = token;
  }
}

/// Where a verifier kernel takes its logits rows' statistics from: computed by the block (slots
/// null: one CTA per request), or read from the workspace slots the rows-parallel phase filled
/// (the last CTA of the request). Every call is made by the whole block.
struct RowStatsProvider {
  LogitsSource target, draft;
  const SplitArgs* w;  // null: compute
  int64_t r, gamma, vocab;
  bool with_norm;

  /// The statistics of n (1 or 2) rows, rows k: draft[k] ? draft : target row index[k], into
  /// scratch->result[0..n), visible to every thread on return.
  __device__ void stats(int n, const bool* draft_row, const int64_t* index,
                        RowStatsScratch* scratch) const {
    if (w == nullptr) {
      LogitsSource sources[2];
      const void* rows[2];
      for (int k = 0; k < n; ++k) {
        sources[k] = draft_row[k] ? draft : target;
        rows[k] = logits_row(
            sources[k], draft_row[k] ? r * gamma + index[k] : r * (gamma + 1) + index[k], vocab);
      }
      compute_row_stats(sources, rows, n, vocab, with_norm, scratch);
      return;
    }
    __syncthreads();  // every thread has read the previous results
    if (threadIdx.x == 0) {
      for (int k = 0; k < n; ++k) {
        const RowStatsSlot* slot = row_stats_slot(*w, r, gamma, draft_row[k], index[k]);
        LogitsRowStats& out = scratch->result[k];
        out.max = load_coherent(&slot->stats.max);
        out.runner_up = load_coherent(&slot->stats.runner_up);
        out.norm = load_coherent(&slot->stats.norm);
        out.argmax = load_coherent(&slot->stats.argmax);
        out.status = load_coherent(&slot->stats.status);
      }
    }
    __syncthreads();
  }
  /// The V2 token of target row i, whose statistics `stats` are ok. Block-uniform.
  __device__ int32_t greedy(int64_t i, const LogitsRowStats& stats,
                            RowStatsScratch* scratch) const {
    if (w == nullptr) {
      const void* row = logits_row(target, r * (gamma + 1) + i, vocab);
      return greedy_token(prob_row(target, row, stats), stats, vocab, scratch);
    }
    return load_coherent(&row_stats_slot(*w, r, gamma, false, i)->greedy_token);
  }
};

/// Host-side checks of a LogitsBatch's shapes, formats and temperatures (InvalidInput), and of the
/// outputs; `needs_draft` is false for V2.
void check_logits_launch(const LogitsBatch& batch, bool needs_draft,
                         const ChainDeviceOutput& output);

}  // namespace speclab::gpu::detail
