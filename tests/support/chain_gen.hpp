// RapidCheck generators of small chain batches, shared by the chain and block verifier properties.
#pragma once

#include <rapidcheck.h>

#include <algorithm>
#include <cstdint>
#include <numeric>
#include <vector>

#include "tests/support/chain_fixture.hpp"

namespace speclab::testing {

/// Integer weights 0..4 per token, at least one positive, so rows often have zeros.
inline std::vector<int> gen_weights(int64_t vocab) {
  auto w = *rc::gen::container<std::vector<int>>(vocab, rc::gen::inRange(0, 5));
  if (std::accumulate(w.begin(), w.end(), 0) == 0) w[*rc::gen::inRange<int64_t>(0, vocab)] = 1;
  return w;
}

/// Integer weights summing to a power of two (8, 16 or 32), zeros frequent: rows w/total are
/// exact in float, and so are the differences and the products by dyadic factors that the residual
/// rules compute, so a float rule can be held to the rational formula to 1e-12.
inline std::vector<int> gen_dyadic_weights(int64_t vocab) {
  const int total = *rc::gen::element(8, 16, 32);
  auto cuts = *rc::gen::container<std::vector<int>>(vocab - 1, rc::gen::inRange(0, total + 1));
  std::sort(cuts.begin(), cuts.end());
  std::vector<int> w(vocab);
  int previous = 0;
  for (int64_t t = 0; t + 1 < vocab; ++t) {
    w[t] = cuts[t] - previous;
    previous = cuts[t];
  }
  w[vocab - 1] = total - previous;
  return w;
}

/// A random small batch: B 1..4, γ 0..4, V 2..6, drafts drawn from q with `seed`, and sometimes
/// ragged n_draft and explicit request ids.
inline OwnedChainBatch gen_chain_batch(uint64_t seed) {
  const int64_t b = *rc::gen::inRange<int64_t>(1, 5);
  const int64_t g = *rc::gen::inRange<int64_t>(0, 5);
  const int64_t v = *rc::gen::inRange<int64_t>(2, 7);
  OwnedChainBatch batch(b, g, v);
  for (int64_t r = 0; r < b; ++r) {
    for (int64_t i = 0; i <= g; ++i) fill_row(batch.target_row(r, i), gen_weights(v));
    for (int64_t i = 0; i < g; ++i) fill_row(batch.draft_row(r, i), gen_weights(v));
  }
  batch.draw_drafts(seed);
  if (*rc::gen::arbitrary<bool>()) {
    batch.n_draft = *rc::gen::container<std::vector<int32_t>>(
        b, rc::gen::inRange<int32_t>(0, static_cast<int32_t>(g) + 1));
  }
  if (*rc::gen::arbitrary<bool>()) {
    batch.request_ids =
        *rc::gen::container<std::vector<uint32_t>>(b, rc::gen::arbitrary<uint32_t>());
  }
  return batch;
}

/// Rewrites every row so that q lives on tokens 0..k-1 and p on k..V-1, and redraws the drafts.
inline void make_supports_disjoint(OwnedChainBatch& b, int64_t k, uint64_t seed) {
  for (int64_t r = 0; r < b.batch; ++r) {
    for (int64_t i = 0; i <= b.gamma; ++i) {
      auto w = gen_weights(b.vocab - k);
      std::vector<int> full(k, 0);
      full.insert(full.end(), w.begin(), w.end());
      fill_row(b.target_row(r, i), full);
    }
    for (int64_t i = 0; i < b.gamma; ++i) {
      auto w = gen_weights(k);
      w.resize(b.vocab, 0);
      fill_row(b.draft_row(r, i), w);
    }
  }
  b.draw_drafts(seed);
}

inline int64_t n_draft_of(const OwnedChainBatch& b, int64_t r) {
  return b.n_draft.empty() ? b.gamma : b.n_draft[r];
}

/// Whether every request of `b` accepted all its drafts and then emitted its bonus draw
/// (OwnedChainBatch::bonus_token) in `res`, verified at (seed, step).
inline bool ends_with_every_bonus(const OwnedChainBatch& b, const ChainResult& res, uint64_t seed,
                                  uint32_t step) {
  for (int64_t r = 0; r < b.batch; ++r) {
    const int64_t n = n_draft_of(b, r);
    if (res.n_accepted[r] != n) return false;
    if (res.emitted_tokens[r * (b.gamma + 1) + n] != b.bonus_token(r, n, seed, step)) return false;
  }
  return true;
}

}  // namespace speclab::testing
