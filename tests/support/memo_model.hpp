// A LanguageModel that remembers the distribution of every prefix it has scored, for statistical
// tests that decode the same short prompt thousands of times: a real model's row for a prefix is
// a function of the prefix, so each distinct prefix is computed once.
#pragma once

#include <cmath>
#include <cstdint>
#include <limits>
#include <map>
#include <string>
#include <vector>

#include "core/model.hpp"

namespace speclab::testing {

/// Wraps `inner`: a row is inner's distribution at temperature 1 without filters (returned as
/// log-probabilities, so this model's own sampling pipeline applies on top). Computes each
/// distinct prefix once, with inner's sequence 0.
class MemoModel : public LanguageModel {
 public:
  explicit MemoModel(LanguageModel& inner) : inner_(inner) {}

  int64_t vocab() const override { return inner_.vocab(); }
  std::string name() const override { return inner_.name() + " (memo)"; }
  int32_t eos_token() const override { return inner_.eos_token(); }
  /// Distinct prefixes computed so far.
  int64_t computed() const { return static_cast<int64_t>(rows_.size()); }

 protected:
  void score_logits(std::span<const ScoreRequest> requests, std::span<float> logits) override {
    const int64_t v = vocab();
    int64_t row = 0;
    for (const ScoreRequest& r : requests) {
      const int64_t length = static_cast<int64_t>(r.tokens.size());
      for (int64_t j = 0; j < r.n_positions; ++j, ++row) {
        const auto prefix = r.tokens.first(static_cast<size_t>(length - r.n_positions + 1 + j));
        const std::vector<float>& logp = lookup(prefix);
        std::copy(logp.begin(), logp.end(), logits.begin() + row * v);
      }
    }
  }

 private:
  const std::vector<float>& lookup(std::span<const int32_t> prefix) {
    std::vector<int32_t> key(prefix.begin(), prefix.end());
    auto it = rows_.find(key);
    if (it != rows_.end()) return it->second;
    const ScoreRequest request{prefix, 1, 0};
    std::vector<float> probs = inner_.score({&request, 1}, SamplingParams{});
    for (float& p : probs) {
      p = p > 0.0f ? std::log(p) : -std::numeric_limits<float>::infinity();
    }
    return rows_.emplace(std::move(key), std::move(probs)).first->second;
  }

  LanguageModel& inner_;
  std::map<std::vector<int32_t>, std::vector<float>> rows_;
};

}  // namespace speclab::testing
