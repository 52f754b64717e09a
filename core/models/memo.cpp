// MemoModel (see memo.hpp).
#include "core/models/memo.hpp"

#include <algorithm>
#include <cmath>
#include <limits>

namespace speclab {

void MemoModel::score_logits(std::span<const ScoreRequest> requests, std::span<float> logits) {
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

const std::vector<float>& MemoModel::lookup(std::span<const int32_t> prefix) {
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

}  // namespace speclab
