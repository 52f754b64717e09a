// Prompt-lookup drafting; see prompt_lookup.hpp.
#include "core/models/prompt_lookup.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <limits>

#include "core/base/error.hpp"

namespace speclab {

PromptLookupModel::PromptLookupModel(int64_t max_k, int64_t min_k, int32_t fallback, int64_t vocab)
    : max_k_(max_k), min_k_(min_k), fallback_(fallback), vocab_(vocab) {
  if (min_k_ < 1 || max_k_ < min_k_) {
    throw InvalidInput(fmt::format(
        "prompt-lookup: min_k = {} and max_k = {}; expected 1 ≤ min_k ≤ max_k", min_k_, max_k_));
  }
  if (vocab_ < 1 || fallback_ < 0 || fallback_ >= vocab_) {
    throw InvalidInput(fmt::format(
        "prompt-lookup: fallback token {} with vocab {}; expected a token id in [0, vocab)",
        fallback_, vocab_));
  }
}

int32_t PromptLookupModel::propose(std::span<const int32_t> prefix) const {
  const int64_t length = static_cast<int64_t>(prefix.size());
  for (int64_t k = std::min(max_k_, length - 1); k >= min_k_; --k) {
    const auto suffix = prefix.subspan(length - k);
    // An occurrence at i needs its follower x_{i+k} inside the prefix: i + k ≤ L - 1.
    for (int64_t i = length - k - 1; i >= 0; --i) {
      if (std::equal(suffix.begin(), suffix.end(), prefix.begin() + i)) return prefix[i + k];
    }
  }
  return fallback_;
}

void PromptLookupModel::score_logits(std::span<const ScoreRequest> requests,
                                     std::span<float> logits) {
  constexpr float kNegInf = -std::numeric_limits<float>::infinity();
  std::fill(logits.begin(), logits.end(), kNegInf);
  int64_t row = 0;
  for (const auto& r : requests) {
    const int64_t length = static_cast<int64_t>(r.tokens.size());
    for (int64_t j = 0; j < r.n_positions; ++j, ++row) {
      const int32_t token = propose(r.tokens.first(length - r.n_positions + 1 + j));
      logits[row * vocab_ + token] = 0.0f;
    }
  }
}

}  // namespace speclab
