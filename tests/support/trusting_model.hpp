// A stateful test model that trusts truncate(): the contract of core/models/model.hpp taken at its
// word. It keeps a token cache per sequence, as a KV cache would, and computes every row from its
// cache, not from the request. The first `length` cached tokens after truncate(id, length) are
// reused without a look (a KV cache keeps keys and values, not tokens to compare); only what it
// cached after that (drafts, other tree branches) is matched against each request. So an engine
// that rolls it back to a length holding a stale token gets wrong rows, where LlamaModel, which
// re-checks every cached token, would hide the mistake.
#pragma once

#include <algorithm>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "core/models/markov.hpp"

namespace speclab::testing {

class TrustingModel : public MarkovModel {
 public:
  explicit TrustingModel(MarkovModel table) : MarkovModel(std::move(table)) {}

  std::string name() const override { return "trusting(" + MarkovModel::name() + ")"; }

  void truncate(int64_t sequence_id, int64_t length) override {
    Cache& cache = caches_[sequence_id];
    if (length < static_cast<int64_t>(cache.tokens.size())) cache.tokens.resize(length);
    cache.trusted = static_cast<int64_t>(cache.tokens.size());
  }
  void release(int64_t sequence_id) override { caches_.erase(sequence_id); }

  /// Trusted cached tokens that differed from the request's tokens at the same position: each one
  /// is in the context of rows the engine never asked for.
  int64_t stale_tokens() const { return stale_tokens_; }
  /// The cached tokens of a sequence (empty when it holds none).
  std::vector<int32_t> cached(int64_t sequence_id) const {
    const auto it = caches_.find(sequence_id);
    return it == caches_.end() ? std::vector<int32_t>{} : it->second.tokens;
  }

 protected:
  void score_logits(std::span<const ScoreRequest> requests, std::span<float> logits) override {
    // The table's rows for the cached tokens, not the requested ones (copies: requests of one
    // sequence in one call, a tree's nodes, rewrite the same cache).
    std::vector<std::vector<int32_t>> contexts;
    for (const ScoreRequest& r : requests) {
      Cache& cache = caches_[r.sequence_id];
      const int64_t length = static_cast<int64_t>(r.tokens.size());
      int64_t keep = std::min({cache.trusted, static_cast<int64_t>(cache.tokens.size()), length});
      for (int64_t i = 0; i < keep; ++i) stale_tokens_ += cache.tokens[i] != r.tokens[i];
      while (keep < std::min<int64_t>(length, cache.tokens.size()) &&
             cache.tokens[keep] == r.tokens[keep]) {
        ++keep;
      }
      cache.tokens.resize(keep);
      cache.tokens.insert(cache.tokens.end(), r.tokens.begin() + keep, r.tokens.end());
      cache.trusted = std::min(cache.trusted, keep);
      contexts.push_back(cache.tokens);
    }
    std::vector<ScoreRequest> from_cache(requests.begin(), requests.end());
    for (size_t i = 0; i < from_cache.size(); ++i) from_cache[i].tokens = contexts[i];
    MarkovModel::score_logits(from_cache, logits);
  }

 private:
  struct Cache {
    std::vector<int32_t> tokens;
    int64_t trusted = 0;  // the length the last truncate() vouched for
  };
  std::map<int64_t, Cache> caches_;
  int64_t stale_tokens_ = 0;
};

}  // namespace speclab::testing
