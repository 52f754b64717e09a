// RapidCheck properties of the block verifier (docs/verifiers.md V5; docs/testing.md "Properties
// that must hold"), and its weights w_i, h_i against the rational formulas to 1e-12.
#include "core/verify/verify_block.hpp"

#include <gtest/gtest.h>
#include <rapidcheck.h>
#include <rapidcheck/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>

#include "core/exact/exact.hpp"
#include "tests/support/chain_fixture.hpp"
#include "tests/support/chain_gen.hpp"
#include "tests/support/zero_mass_rows.hpp"

namespace speclab {
namespace {

using testing::fill_row;
using testing::gen_weights;
using testing::n_draft_of;
using testing::OwnedChainBatch;

struct Instance {
  OwnedChainBatch batch;
  BlockParams params;
};

Instance gen_instance() {
  Instance inst;
  inst.params.seed = *rc::gen::arbitrary<uint64_t>();
  inst.params.step = *rc::gen::arbitrary<uint32_t>();
  inst.batch = testing::gen_chain_batch(inst.params.seed);
  return inst;
}

RC_GTEST_PROP(VerifyBlockProperty, OutputIsAcceptedPrefixPlusOneToken, ()) {
  const auto inst = gen_instance();
  const auto& b = inst.batch;
  const auto res = verify_block(b.view(), inst.params);
  RC_ASSERT_FALSE(res.lossy);
  for (int64_t r = 0; r < b.batch; ++r) {
    const int64_t n = res.n_accepted[r];
    RC_ASSERT(n >= 0);
    RC_ASSERT(n <= n_draft_of(b, r));
    for (int64_t i = 0; i < b.gamma; ++i) {
      RC_ASSERT(res.accept_mask[r * b.gamma + i] == (i < n ? 1 : 0));
    }
    for (int64_t i = 0; i <= b.gamma; ++i) {
      const int32_t t = res.emitted_tokens[r * (b.gamma + 1) + i];
      if (i < n) RC_ASSERT(t == b.draft_tokens[r * b.gamma + i]);
      if (i == n) RC_ASSERT(t >= 0 && t < b.vocab);
      if (i > n) RC_ASSERT(t == -1);
    }
  }
}

RC_GTEST_PROP(VerifyBlockProperty, ZeroProbabilityTokenIsNeverEmitted, ()) {
  auto inst = gen_instance();
  auto& b = inst.batch;
  const auto res = verify_block(b.view(), inst.params);
  for (int64_t r = 0; r < b.batch; ++r) {
    for (int64_t i = 0; i <= res.n_accepted[r]; ++i) {
      const int32_t t = res.emitted_tokens[r * (b.gamma + 1) + i];
      RC_ASSERT(b.target_row(r, i)[t] > 0.0f);
    }
  }
}

RC_GTEST_PROP(VerifyBlockProperty, DraftEqualToTargetAcceptsEverything, ()) {
  auto inst = gen_instance();
  auto& b = inst.batch;
  for (int64_t r = 0; r < b.batch; ++r) {
    for (int64_t i = 0; i < b.gamma; ++i)
      std::copy_n(b.target_row(r, i), b.vocab, b.draft_row(r, i));
  }
  b.draw_drafts(inst.params.seed);
  const auto res = verify_block(b.view(), inst.params);
  for (int64_t r = 0; r < b.batch; ++r) RC_ASSERT(res.n_accepted[r] == n_draft_of(b, r));
}

RC_GTEST_PROP(VerifyBlockProperty, DisjointSupportsAcceptNothing, ()) {
  auto inst = gen_instance();
  auto& b = inst.batch;
  const int64_t k = *rc::gen::inRange<int64_t>(1, b.vocab);
  testing::make_supports_disjoint(b, k, inst.params.seed);
  const auto res = verify_block(b.view(), inst.params);
  for (int64_t r = 0; r < b.batch; ++r) {
    RC_ASSERT(res.n_accepted[r] == 0);
    RC_ASSERT(res.emitted_tokens[r * (b.gamma + 1)] >= k);
  }
}

RC_GTEST_PROP(VerifyBlockProperty, RaggedBatchEqualsEachRequestAlone, ()) {
  const auto inst = gen_instance();
  const auto& b = inst.batch;
  const auto together = verify_block(b.view(), inst.params);
  for (int64_t r = 0; r < b.batch; ++r) {
    const int64_t g = n_draft_of(b, r);
    const OwnedChainBatch alone = testing::single_request(b, r);
    const auto single = verify_block(alone.view(), inst.params);
    RC_ASSERT(single.n_accepted[0] == together.n_accepted[r]);
    for (int64_t i = 0; i <= g; ++i) {
      RC_ASSERT(single.emitted_tokens[i] == together.emitted_tokens[r * (b.gamma + 1) + i]);
    }
  }
}

RC_GTEST_PROP(VerifyBlockProperty, ResultsDoNotDependOnBatchOrder, ()) {
  auto inst = gen_instance();
  auto& b = inst.batch;
  if (b.request_ids.empty()) {
    b.request_ids.resize(b.batch);
    std::iota(b.request_ids.begin(), b.request_ids.end(), 0u);
  }
  if (b.n_draft.empty()) b.n_draft.assign(b.batch, static_cast<int32_t>(b.gamma));
  std::vector<int64_t> order(b.batch);
  for (int64_t s = 0; s < b.batch; ++s) order[s] = b.batch - 1 - s;
  const OwnedChainBatch reversed = testing::permuted(b, order);
  const auto a = verify_block(b.view(), inst.params);
  const auto c = verify_block(reversed.view(), inst.params);
  for (int64_t s = 0; s < b.batch; ++s) {
    const int64_t r = order[s];
    RC_ASSERT(c.n_accepted[s] == a.n_accepted[r]);
    RC_ASSERT(std::equal(&c.emitted_tokens[s * (b.gamma + 1)],
                         &c.emitted_tokens[(s + 1) * (b.gamma + 1)],
                         &a.emitted_tokens[r * (b.gamma + 1)]));
  }
}

// The output is a function of the batch, seed and step alone: the same again after a call at
// another seed and step, from a copy of the batch in other memory.
RC_GTEST_PROP(VerifyBlockProperty, SameSeedGivesSameOutput, ()) {
  const auto inst = gen_instance();
  const auto a = verify_block(inst.batch.view(), inst.params);
  verify_block(inst.batch.view(), {.seed = inst.params.seed + 1, .step = inst.params.step + 7});
  const auto copy = inst.batch;
  const auto c = verify_block(copy.view(), inst.params);
  RC_ASSERT(a.emitted_tokens == c.emitted_tokens);
  RC_ASSERT(a.n_accepted == c.n_accepted);
}

// After a fully accepted block the bonus token is the categorical draw from p_{γ_b+1} at the
// bonus address (docs/randomness.md).
RC_GTEST_PROP(VerifyBlockProperty, BonusTokenIsTheDrawAtItsAddress, ()) {
  auto inst = gen_instance();
  auto& b = inst.batch;
  b.draft_the_target();
  RC_ASSERT(testing::ends_with_every_bonus(b, verify_block(b.view(), inst.params), inst.params.seed,
                                           inst.params.step));
}

// V5's zero-mass fallback reached (tests/support/zero_mass_rows.hpp): the weight at the drafted
// token is 0, so τ = 0, and max(0, p − q) has no mass: p's draw at the residual uniform, counted.
TEST(VerifyBlockFallback, ZeroMassResidualDrawsFromTheTarget) {
  const testing::ZeroMassRows rows;
  const auto b = testing::zero_mass_chain_batch(rows);
  EXPECT_TRUE(
      rows.fell_back_to_target(verify_block(b.view(), {.seed = rows.seed, .step = rows.step})));
}

RC_GTEST_PROP(VerifyBlockProperty, WeightsMatchRationalFormulas, ()) {
  // docs/testing.md: the thin random layer sits on pure functions checked against rationals. Every
  // float is a rational, so the formulas of docs/verifiers.md V5 are evaluated exactly on the very
  // rows the verifier reads; w agrees to 1e-12, h (a ratio of sums) to 1e-9.
  auto inst = gen_instance();
  auto& b = inst.batch;
  using exact::Q;
  const auto row = [&](const float* values) {
    exact::Row out;
    for (int64_t t = 0; t < b.vocab; ++t) out.push_back(Q(static_cast<double>(values[t])));
    return out;
  };
  for (int64_t r = 0; r < b.batch; ++r) {
    const int64_t n = n_draft_of(b, r);
    const BlockWeights weights = block_weights(b.view(), r);
    std::vector<Q> w{Q(1)};
    for (int64_t i = 1; i <= n; ++i) {
      const exact::Row p = row(b.target_row(r, i - 1));
      const exact::Row q = row(b.draft_row(r, i - 1));
      const int32_t x = b.draft_tokens[r * b.gamma + i - 1];
      w.push_back(q[x] == 0 ? Q(0) : std::min(Q(1), Q(w.back() * p[x] / q[x])));
      RC_ASSERT(std::abs(weights.w[i] - w[i].convert_to<double>()) < 1e-12);
    }
    for (int64_t i = 1; i < n; ++i) {
      const exact::Row p = row(b.target_row(r, i));
      const exact::Row q = row(b.draft_row(r, i));
      Q z = 0;
      for (size_t a = 0; a < p.size(); ++a) z += std::max(Q(0), Q(w[i] * p[a] - q[a]));
      const Q den = z + 1 - w[i];
      const Q h = den == 0 ? Q(1) : Q(z / den);
      RC_ASSERT(std::abs(weights.h[i] - h.convert_to<double>()) < 1e-9);
    }
    if (n > 0) RC_ASSERT(weights.h[n] == weights.w[n]);
  }
}

RC_GTEST_PROP(VerifyBlockProperty, ResidualRowMatchesRationalFormula, ()) {
  // block_residual_weights, the row verify_block samples at τ < γ_b, against
  // norm((w·p − q)⁺) (docs/verifiers.md V5 step 4) in rationals. Rows with power-of-two totals and
  // w = k/16 make every float operation of the rule exact, so the normalised row must agree to
  // 1e-12 (the fixed-point grid is 2^-58); a row with no exact mass has no fixed-point mass; at
  // w = 1 it is V1's residual row bit for bit.
  using exact::Q;
  const int64_t v = *rc::gen::inRange<int64_t>(2, 9);
  std::vector<float> p(v), q(v);
  fill_row(p.data(), testing::gen_dyadic_weights(v));
  fill_row(q.data(), testing::gen_dyadic_weights(v));
  const int sixteenths = *rc::gen::inRange(0, 17);
  const float w = static_cast<float>(sixteenths) / 16.0f;
  const std::vector<uint64_t> weights = block_residual_weights(w, p, q);
  RC_ASSERT(weights.size() == static_cast<size_t>(v));
  std::vector<Q> residual(v);
  Q mass = 0;
  uint64_t total = 0;
  for (int64_t t = 0; t < v; ++t) {
    residual[t] = std::max(
        Q(0), Q(Q(sixteenths, 16) * Q(static_cast<double>(p[t])) - Q(static_cast<double>(q[t]))));
    mass += residual[t];
    total += weights[t];
  }
  if (sixteenths == 16) RC_ASSERT(weights == chain_residual_weights(p, q, 1.0f));
  if (mass == 0) {
    RC_ASSERT(total == 0u);
    return;
  }
  RC_ASSERT(std::abs(static_cast<double>(total) / 0x1p58 - mass.convert_to<double>()) < 1e-12);
  for (int64_t t = 0; t < v; ++t) {
    const double row = static_cast<double>(weights[t]) / static_cast<double>(total);
    RC_ASSERT(std::abs(row - Q(residual[t] / mass).convert_to<double>()) < 1e-12);
  }
}

TEST(VerifyBlockProperty, DifferentSeedGivesDifferentStream) {
  OwnedChainBatch b(64, 4, 8);
  for (int64_t r = 0; r < 64; ++r) {
    for (int64_t i = 0; i <= 4; ++i) fill_row(b.target_row(r, i), {1, 2, 3, 4, 4, 3, 2, 1});
    for (int64_t i = 0; i < 4; ++i) fill_row(b.draft_row(r, i), {4, 3, 2, 1, 1, 2, 3, 4});
  }
  b.draw_drafts(11);
  EXPECT_NE(verify_block(b.view(), {.seed = 1}).emitted_tokens,
            verify_block(b.view(), {.seed = 2}).emitted_tokens);
}

}  // namespace
}  // namespace speclab
