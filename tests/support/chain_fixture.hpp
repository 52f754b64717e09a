// Owned storage for a ChainBatch, and builders for test instances.
#pragma once

#include <algorithm>
#include <cstdint>
#include <numeric>
#include <span>
#include <vector>

#include "core/base/philox.hpp"
#include "core/sampling/sampling.hpp"
#include "core/verify/verify_chain.hpp"

namespace speclab::testing {

struct OwnedChainBatch {
  int64_t batch = 0, gamma = 0, vocab = 0;
  std::vector<float> probs_target;    // [B, γ+1, V]
  std::vector<float> probs_draft;     // [B, γ, V]
  std::vector<int32_t> draft_tokens;  // [B, γ]
  std::vector<int32_t> n_draft;       // [B] or empty
  std::vector<uint32_t> request_ids;  // [B] or empty
  std::vector<int64_t> positions;     // [B] or empty (the match verifiers' output positions)

  OwnedChainBatch() = default;
  OwnedChainBatch(int64_t b, int64_t g, int64_t v)
      : batch(b),
        gamma(g),
        vocab(v),
        probs_target(b * (g + 1) * v, 0.0f),
        probs_draft(b * g * v, 0.0f),
        draft_tokens(b * g, 0) {}

  ChainBatch view() const {
    return {batch,        gamma,   vocab,       probs_target, probs_draft,
            draft_tokens, n_draft, request_ids, positions};
  }
  float* target_row(int64_t r, int64_t i) { return &probs_target[(r * (gamma + 1) + i) * vocab]; }
  float* draft_row(int64_t r, int64_t i) { return &probs_draft[(r * gamma + i) * vocab]; }
  int32_t& token(int64_t r, int64_t i) { return draft_tokens[r * gamma + i]; }

  /// Draws every draft token from its q row with the Philox draft-sample uniforms.
  void draw_drafts(uint64_t seed) {
    for (int64_t r = 0; r < batch; ++r) {
      for (int64_t i = 0; i < gamma; ++i) {
        const RandomAddress a{
            seed, static_cast<uint32_t>(r), 0, static_cast<uint32_t>(i + 1), Purpose::kDraftSample,
            0};
        token(r, i) =
            sample_categorical({draft_row(r, i), static_cast<size_t>(vocab)}, philox_bits(a));
      }
    }
  }

  /// Makes every q row its p row, each draft token one p gives weight (its argmax where the drawn
  /// one has none): then every accept test passes, V1's and V3's (u·l·q ≤ p) and V5's (weights
  /// 1), and each request ends with its bonus token.
  void draft_the_target() {
    for (int64_t r = 0; r < batch; ++r) {
      for (int64_t i = 0; i < gamma; ++i) {
        const float* p = target_row(r, i);
        std::copy_n(p, vocab, draft_row(r, i));
        if (p[token(r, i)] == 0.0f)
          token(r, i) = static_cast<int32_t>(std::max_element(p, p + vocab) - p);
      }
    }
  }

  /// The bonus token request r must emit after accepting all n of its drafts: the categorical draw
  /// from p_{n+1} with the uniform at (seed; request id, step, n + 1, kBonusSample) —
  /// docs/randomness.md.
  int32_t bonus_token(int64_t r, int64_t n, uint64_t seed, uint32_t step) const {
    const RandomAddress address{seed,
                                request_ids.empty() ? static_cast<uint32_t>(r) : request_ids[r],
                                step,
                                static_cast<uint32_t>(n + 1),
                                Purpose::kBonusSample,
                                0};
    const std::span<const float> row(&probs_target[(r * (gamma + 1) + n) * vocab], vocab);
    return sample_categorical(row, philox_bits(address));
  }
};

/// Request r of `b` alone: a batch of one with γ = its own n_draft and its request id.
inline OwnedChainBatch single_request(const OwnedChainBatch& b, int64_t r) {
  const int64_t g = b.n_draft.empty() ? b.gamma : b.n_draft[r];
  OwnedChainBatch alone(1, g, b.vocab);
  std::copy_n(&b.probs_target[r * (b.gamma + 1) * b.vocab], (g + 1) * b.vocab,
              alone.probs_target.begin());
  std::copy_n(&b.probs_draft[r * b.gamma * b.vocab], g * b.vocab, alone.probs_draft.begin());
  std::copy_n(&b.draft_tokens[r * b.gamma], g, alone.draft_tokens.begin());
  alone.request_ids = {b.request_ids.empty() ? static_cast<uint32_t>(r) : b.request_ids[r]};
  return alone;
}

/// `b` with its requests reordered: request s of the result is request order[s] of `b`, with its
/// n_draft and request id (both must be set in `b`).
inline OwnedChainBatch permuted(const OwnedChainBatch& b, const std::vector<int64_t>& order) {
  OwnedChainBatch out(b.batch, b.gamma, b.vocab);
  out.n_draft.resize(b.batch);
  out.request_ids.resize(b.batch);
  for (int64_t s = 0; s < b.batch; ++s) {
    const int64_t r = order[s];
    std::copy_n(&b.probs_target[r * (b.gamma + 1) * b.vocab], (b.gamma + 1) * b.vocab,
                &out.probs_target[s * (b.gamma + 1) * b.vocab]);
    std::copy_n(&b.probs_draft[r * b.gamma * b.vocab], b.gamma * b.vocab,
                &out.probs_draft[s * b.gamma * b.vocab]);
    std::copy_n(&b.draft_tokens[r * b.gamma], b.gamma, &out.draft_tokens[s * b.gamma]);
    out.n_draft[s] = b.n_draft[r];
    out.request_ids[s] = b.request_ids[r];
  }
  return out;
}

/// Integer weights -> a float probability row (sums to 1 within float rounding).
inline void fill_row(float* row, const std::vector<int>& weights) {
  const double total = std::accumulate(weights.begin(), weights.end(), 0.0);
  for (size_t t = 0; t < weights.size(); ++t) row[t] = static_cast<float>(weights[t] / total);
}

}  // namespace speclab::testing
