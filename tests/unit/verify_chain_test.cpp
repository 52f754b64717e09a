// core/verify/verify_chain: fixed cases and every bad input of docs/verifiers.md "Bad input", for
// the reference and the fast path alike.
#include "core/verify/verify_chain.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <set>

#include "core/base/error.hpp"
#include "core/base/philox.hpp"
#include "core/sampling/sampling.hpp"
#include "tests/support/chain_fixture.hpp"

namespace speclab {
namespace {

using ::testing::ElementsAre;
using testing::fill_row;
using ::testing::HasSubstr;
using testing::OwnedChainBatch;

using Verifier = std::function<ChainResult(const ChainBatch&, const ChainParams&)>;

class VerifyChain : public ::testing::TestWithParam<bool> {
 protected:
  ChainResult run(const OwnedChainBatch& b, const ChainParams& params = {}) {
    return GetParam() ? verify_chain(b.view(), params) : verify_chain_reference(b.view(), params);
  }
  std::string error_of(const OwnedChainBatch& b, const ChainParams& params = {}) {
    try {
      run(b, params);
    } catch (const InvalidInput& e) {
      return e.what();
    }
    return "(no error)";
  }
};

// B = 2, γ = 2, V = 3, every row uniform except where a test changes it.
OwnedChainBatch uniform_batch() {
  OwnedChainBatch b(2, 2, 3);
  for (float& x : b.probs_target) x = 1.0f / 3;
  for (float& x : b.probs_draft) x = 1.0f / 3;
  b.draft_tokens = {0, 1, 2, 0};
  return b;
}

TEST_P(VerifyChain, DraftEqualToTargetAcceptsEverythingAndDrawsBonus) {
  const auto b = uniform_batch();
  const auto r = run(b, {.seed = 9});
  EXPECT_THAT(r.n_accepted, ElementsAre(2, 2));
  EXPECT_THAT(r.accept_mask, ElementsAre(1, 1, 1, 1));
  EXPECT_EQ(r.emitted_tokens[0], 0);
  EXPECT_EQ(r.emitted_tokens[1], 1);
  EXPECT_GE(r.emitted_tokens[2], 0);  // bonus
  EXPECT_FALSE(r.lossy);
  EXPECT_EQ(r.residual_fallbacks, 0);
}

TEST_P(VerifyChain, OneHotTargetEmitsThatToken) {
  auto b = uniform_batch();
  for (int64_t r = 0; r < 2; ++r) {
    for (int64_t i = 0; i <= 2; ++i) fill_row(b.target_row(r, i), {0, 0, 1});
  }
  b.draft_tokens = {2, 0, 0, 2};
  const auto r = run(b, {.seed = 1});
  // Request 0: x1 = 2 accepted, x2 = 0 rejected, residual max(0, p - q) is one-hot at 2.
  EXPECT_THAT(r.emitted_tokens, ElementsAre(2, 2, -1, 2, -1, -1));
  EXPECT_THAT(r.n_accepted, ElementsAre(1, 0));
}

TEST_P(VerifyChain, RaggedRequestsLeavePaddingUnread) {
  auto b = uniform_batch();
  b.n_draft = {0, 1};
  // Padding rows may hold anything: NaN in request 0's unused positions is never read.
  b.draft_row(0, 0)[0] = std::nanf("");
  b.target_row(0, 1)[0] = std::nanf("");
  b.token(1, 1) = 77;
  const auto r = run(b, {.seed = 3});
  EXPECT_EQ(r.n_accepted[0], 0);
  EXPECT_EQ(r.emitted_tokens[1], -1);
  EXPECT_EQ(r.n_accepted[1], 1);
  EXPECT_EQ(r.emitted_tokens[5], -1);
}

TEST_P(VerifyChain, GreedyNeedsNoDraftProbabilities) {
  auto b = uniform_batch();
  for (int64_t r = 0; r < 2; ++r) {
    fill_row(b.target_row(r, 0), {1, 3, 2});
    fill_row(b.target_row(r, 1), {2, 2, 1});  // tie: token 0 is the argmax
    fill_row(b.target_row(r, 2), {1, 1, 5});
  }
  b.probs_draft.clear();
  b.draft_tokens = {1, 0, 1, 1};
  const auto r = run(b, {.method = ChainMethod::kGreedy});
  EXPECT_THAT(r.emitted_tokens, ElementsAre(1, 0, 2, 1, 0, -1));
  EXPECT_THAT(r.n_accepted, ElementsAre(2, 1));
}

TEST_P(VerifyChain, LenientIsMarkedLossy) {
  const auto b = uniform_batch();
  EXPECT_TRUE(run(b, {.method = ChainMethod::kLenient, .leniency = 0.5}).lossy);
}

TEST_P(VerifyChain, ResidualFallbackIsCountedAndSamplesTarget) {
  // p ≤ q everywhere with both rows normalised within 1e-4: a rejection is possible at token 0
  // (p/q = 0.6; every draft is token 0) yet max(0, p − q) has no mass. docs/verifiers.md V1: sample
  // p and count the event. p spreads its mass over tokens 1..3, so which token the fallback emits
  // is visible: exactly sample_categorical(p) with the residual uniform of position 1
  // (docs/randomness.md: (seed; request, step, n + 1, kResidualSample, 0)).
  constexpr int64_t kRequests = 64;
  constexpr uint64_t kSeed = 5;
  OwnedChainBatch b(kRequests, 1, 4);
  const float rest = (1.0f - 2e-4f) / 3.0f;
  for (int64_t r = 0; r < kRequests; ++r) {
    const float q[] = {2e-4f, rest, rest, rest};
    const float p[] = {1.2e-4f, rest, rest, rest};
    std::copy_n(q, 4, b.draft_row(r, 0));
    std::copy_n(p, 4, b.target_row(r, 0));
    fill_row(b.target_row(r, 1), {1, 1, 1, 1});
  }
  const auto r = run(b, {.seed = kSeed});
  int64_t rejected = 0;
  std::set<int32_t> fallback_tokens;
  for (int64_t i = 0; i < kRequests; ++i) {
    if (r.n_accepted[i] == 0) {
      ++rejected;
      EXPECT_EQ(r.residual_fallback[i], 1);
      const RandomAddress residual{kSeed, static_cast<uint32_t>(i), 0,
                                   1,     Purpose::kResidualSample, 0};
      const int32_t expected = sample_categorical({b.target_row(i, 0), 4}, philox_bits(residual));
      EXPECT_EQ(r.emitted_tokens[i * 2], expected) << "request " << i;
      fallback_tokens.insert(r.emitted_tokens[i * 2]);
    } else {
      EXPECT_EQ(r.residual_fallback[i], 0);
    }
  }
  EXPECT_GT(rejected, 0);
  EXPECT_EQ(r.residual_fallbacks, rejected);
  EXPECT_GE(fallback_tokens.size(), 2u) << "the fallback's token must vary for the check to bite";
}

TEST_P(VerifyChain, RejectsEmptyBatchAndBadDimensions) {
  OwnedChainBatch b(0, 2, 3);
  EXPECT_THAT(error_of(b), HasSubstr("batch size B is 0; expected at least one request"));
  auto c = uniform_batch();
  c.vocab = 0;
  EXPECT_THAT(error_of(c), HasSubstr("vocab size V is 0"));
  auto d = uniform_batch();
  d.gamma = -1;
  EXPECT_THAT(error_of(d), HasSubstr("gamma is -1; expected γ ≥ 0"));
}

TEST_P(VerifyChain, RejectsWrongShapesNamingTheArgument) {
  auto b = uniform_batch();
  b.probs_target.pop_back();
  EXPECT_THAT(error_of(b), HasSubstr("probs_target has 17 values; expected B·(γ+1)·V with B=2, "
                                     "γ=2, V=3 = 18"));
  b = uniform_batch();
  b.probs_draft.push_back(0.0f);
  EXPECT_THAT(error_of(b), HasSubstr("probs_draft has 13 values; expected B·γ·V"));
  b = uniform_batch();
  b.draft_tokens.pop_back();
  EXPECT_THAT(error_of(b), HasSubstr("draft_tokens has 3 values; expected B·γ"));
  b = uniform_batch();
  b.n_draft = {1};
  EXPECT_THAT(error_of(b), HasSubstr("n_draft has 1 values; expected B = 2"));
  b = uniform_batch();
  b.request_ids = {1, 2, 3};
  EXPECT_THAT(error_of(b), HasSubstr("request_ids has 3 values"));
}

TEST_P(VerifyChain, RejectsOutOfRangeGammaAndTokens) {
  auto b = uniform_batch();
  b.n_draft = {2, 3};
  EXPECT_THAT(error_of(b), HasSubstr("n_draft[1] (request 1) is 3; expected 0 ≤ n_draft ≤ γ = 2"));
  b.n_draft = {-1, 0};
  EXPECT_THAT(error_of(b), HasSubstr("n_draft[0] (request 0) is -1"));
  b = uniform_batch();
  b.token(1, 1) = 3;
  EXPECT_THAT(error_of(b), HasSubstr("draft_tokens[1, 1] (request 1, position 2) is 3; expected a "
                                     "token id in [0, 3)"));
  b.token(1, 1) = -2;
  EXPECT_THAT(error_of(b), HasSubstr("is -2"));
}

TEST_P(VerifyChain, RejectsNanInfNegativeAndUnnormalisedRows) {
  // NaN in the row of an accept test (request 1, position 1, the draft token's own entry).
  auto b = uniform_batch();
  b.target_row(1, 0)[2] = std::nanf("");
  EXPECT_THAT(error_of(b), HasSubstr("probs_target row 3 (request 1, position 1): token 2 has "
                                     "probability nan"));
  b = uniform_batch();
  b.draft_row(0, 1)[1] = std::numeric_limits<float>::infinity();
  EXPECT_THAT(error_of(b), HasSubstr("probs_draft row 1 (request 0, position 2): token 1 has "
                                     "probability inf"));
  b = uniform_batch();
  b.draft_row(1, 0)[2] = -0.1f;
  EXPECT_THAT(error_of(b), HasSubstr("probs_draft row 2 (request 1, position 1): token 2 has "
                                     "probability -0.1"));
}

TEST_P(VerifyChain, RejectsUnnormalisedRowItMustScan) {
  // Request 0 rejects at position 1 (p(x) = 0), so the residual row p_1 and q_1 are scanned.
  auto b = uniform_batch();
  fill_row(b.target_row(0, 0), {0, 1, 1});
  b.target_row(0, 0)[1] = 0.4f;  // sums to 0.9
  EXPECT_THAT(error_of(b), HasSubstr("probs_target row 0 (request 0, position 1) sums to 0.9; "
                                     "expected 1 ± 0.0001"));
  // The bonus row of request 1 (all accepted) is scanned too.
  b = uniform_batch();
  b.target_row(1, 2)[0] = 0.0f;
  EXPECT_THAT(error_of(b), HasSubstr("probs_target row 5 (request 1, position 3) sums to 0.666"));
}

TEST_P(VerifyChain, NanInResidualRowNeverBecomesAToken) {
  auto b = uniform_batch();
  fill_row(b.target_row(0, 0), {0, 1, 1});  // x1 = 0 has p = 0: rejected
  b.draft_row(0, 0)[2] = std::nanf("");
  EXPECT_THAT(error_of(b), HasSubstr("probs_draft row 0 (request 0, position 1): token 2 has "
                                     "probability nan"));
}

TEST_P(VerifyChain, RejectsBadLeniency) {
  const auto b = uniform_batch();
  EXPECT_THAT(error_of(b, {.method = ChainMethod::kLenient, .leniency = 0.0}),
              HasSubstr("leniency is 0; expected 0 < leniency ≤ 1"));
  EXPECT_THAT(error_of(b, {.method = ChainMethod::kLenient, .leniency = 1.5}),
              HasSubstr("leniency is 1.5"));
}

INSTANTIATE_TEST_SUITE_P(ReferenceAndFast, VerifyChain, ::testing::Values(false, true),
                         [](const auto& info) { return info.param ? "Fast" : "Reference"; });

TEST(VerifyChainMethod, ParsesNamesAndRejectsUnknown) {
  EXPECT_EQ(parse_chain_method("token"), ChainMethod::kToken);
  EXPECT_EQ(parse_chain_method("greedy"), ChainMethod::kGreedy);
  EXPECT_EQ(parse_chain_method("lenient"), ChainMethod::kLenient);
  EXPECT_EQ(to_string(ChainMethod::kLenient), "lenient");
  EXPECT_TRUE(is_lossy(ChainMethod::kLenient));
  EXPECT_FALSE(is_lossy(ChainMethod::kToken));
  try {
    parse_chain_method("typical");
    FAIL() << "no error";
  } catch (const InvalidInput& e) {
    EXPECT_THAT(e.what(), HasSubstr("method is \"typical\"; expected one of"));
  }
}

}  // namespace
}  // namespace speclab
