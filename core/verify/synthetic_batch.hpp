// Synthetic verification batches for the demo and benchmarks: language-like target rows and
// drafts perturbed from them, with the closed-form acceptance β = Σ min(p, q) of every row.
#pragma once

#include <cstdint>
#include <vector>

#include "core/verify/verify_chain.hpp"

namespace speclab {

/// A ChainBatch with owned storage.
struct ChainBatchData {
  int64_t batch = 0, gamma = 0, vocab = 0;
  std::vector<float> probs_target;    ///< [B, γ+1, V]
  std::vector<float> probs_draft;     ///< [B, γ, V]
  std::vector<int32_t> draft_tokens;  ///< [B, γ]
  std::vector<int32_t> n_draft;       ///< [B] or empty
  std::vector<uint32_t> request_ids;  ///< [B] or empty

  ChainBatch view() const {
    return {batch, gamma, vocab, probs_target, probs_draft, draft_tokens, n_draft, request_ids};
  }
};

struct SyntheticBatchParams {
  int64_t batch = 8;
  int64_t gamma = 5;
  int64_t vocab = 32000;
  double target_scale = 2.5;  ///< sd of the target's Gaussian logits (higher = peakier)
  double draft_noise = 0.6;   ///< sd of the logit noise that separates draft from target
  uint64_t seed = 0;
};

/// Target rows p = softmax(target_scale · z), draft rows q = softmax(log p + draft_noise · z'),
/// z, z' standard normal from Philox; draft tokens drawn from q with the kDraftSample uniforms
/// at (seed; request b, step 0, position i).
ChainBatchData make_synthetic_batch(const SyntheticBatchParams& params);

/// β = Σ_x min(p_i(x), q_i(x)) for every request and draft position, [B, γ].
std::vector<double> acceptance_rates(const ChainBatchData& data);

}  // namespace speclab
