// Prompt-lookup drafting (Saxena 2023; vLLM's `[ngram]` speculative method): the draft proposes
// the token that followed the most recent earlier occurrence of the sequence's last k tokens, so
// q is one-hot (docs/architecture.md "core/models"). V = 256 (bytes, like core/models/ngram) by
// default; it needs no tables, so it drafts for any vocabulary.
#pragma once

#include <cstdint>
#include <span>
#include <string>

#include "core/models/model.hpp"

namespace speclab {

/// The prompt-lookup draft as a LanguageModel. For a prefix x_1..x_L and k = max_k down to min_k:
/// find the largest i < L - k + 1 with x_i..x_{i+k-1} = x_{L-k+1}..x_L (the most recent earlier
/// occurrence of the last k tokens; it may overlap them) and propose x_{i+k}. With no match for
/// any k (or L ≤ min_k) it proposes `fallback`, by default ' ' (32, the most frequent byte of
/// English text), so the proposal is always defined and deterministic. Each row is one-hot on the
/// proposal: log-probability 0 there, -inf elsewhere.
///
/// vLLM proposes the whole continuation of one match in a single step; here each draft step is a
/// separate m = 1 call on the sequence extended by the earlier drafts, which re-runs the lookup
/// (usually continuing the same match). vLLM v0 took the earliest match; we take the most recent,
/// which follows the current topic of a long sequence.
class PromptLookupModel : public LanguageModel {
 public:
  /// Throws InvalidInput unless 1 ≤ min_k ≤ max_k and fallback is in [0, vocab).
  explicit PromptLookupModel(int64_t max_k = 3, int64_t min_k = 1, int32_t fallback = ' ',
                             int64_t vocab = 256);

  int64_t vocab() const override { return vocab_; }
  std::string name() const override { return "prompt-lookup"; }
  int64_t max_k() const { return max_k_; }
  int64_t min_k() const { return min_k_; }
  int32_t fallback() const { return fallback_; }

  /// The token proposed after `prefix` (the rule above). O(L · max_k) for L tokens.
  int32_t propose(std::span<const int32_t> prefix) const;

 protected:
  void score_logits(std::span<const ScoreRequest> requests, std::span<float> logits) override;

 private:
  int64_t max_k_, min_k_;
  int32_t fallback_;
  int64_t vocab_;
};

}  // namespace speclab
