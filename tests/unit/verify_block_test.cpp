// core/verify/verify_block (docs/verifiers.md V5): the weights on the test vector, fixed cases, and
// every bad input of docs/verifiers.md "Bad input" with its message.
#include "core/verify/verify_block.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>

#include "core/base/error.hpp"
#include "tests/support/chain_fixture.hpp"

namespace speclab {
namespace {

using ::testing::ElementsAre;
using testing::fill_row;
using ::testing::HasSubstr;
using testing::OwnedChainBatch;

std::string error_of(const OwnedChainBatch& b) {
  try {
    verify_block(b.view(), {});
  } catch (const InvalidInput& e) {
    return e.what();
  }
  return "(no error)";
}

// The docs/verifiers.md V5 test vector, one request per draft block: q = (2/3, 1/3), p = (1/3,
// 2/3), γ = 2.
OwnedChainBatch spec_vector_blocks() {
  OwnedChainBatch b(4, 2, 2);
  for (int64_t r = 0; r < 4; ++r) {
    for (int64_t i = 0; i <= 2; ++i) fill_row(b.target_row(r, i), {1, 2});
    for (int64_t i = 0; i < 2; ++i) fill_row(b.draft_row(r, i), {2, 1});
  }
  b.draft_tokens = {0, 0, 0, 1, 1, 0, 1, 1};
  return b;
}

TEST(VerifyBlock, WeightsOnTheSpecVector) {
  // Derived in tests/property/exact_test.cpp (Exact.BlockSpecTestVectorAcceptsElevenNinths).
  const auto b = spec_vector_blocks();
  const auto w00 = block_weights(b.view(), 0), w01 = block_weights(b.view(), 1);
  const auto w10 = block_weights(b.view(), 2), w11 = block_weights(b.view(), 3);
  EXPECT_NEAR(w00.w[1], 0.5, 1e-7);
  EXPECT_NEAR(w00.w[2], 0.25, 1e-7);
  EXPECT_NEAR(w00.h[1], 0.0, 1e-7);
  EXPECT_NEAR(w00.h[2], 0.25, 1e-7);
  EXPECT_NEAR(w01.h[1], 0.0, 1e-7);
  EXPECT_NEAR(w01.h[2], 1.0, 1e-7);
  EXPECT_NEAR(w10.w[1], 1.0, 1e-7);
  EXPECT_NEAR(w10.h[1], 1.0, 1e-7);
  EXPECT_NEAR(w10.h[2], 0.5, 1e-7);
  EXPECT_NEAR(w11.h[1], 1.0, 1e-7);
  EXPECT_NEAR(w11.h[2], 1.0, 1e-7);
}

TEST(VerifyBlock, PassAfterFailureStillAccepts) {
  // Block (0,1): h_1 = 0 (η_1 always fails) but h_2 = 1: τ = 2 whatever the seed — the case where
  // block verification beats V1, which stops at the first rejection.
  auto b = spec_vector_blocks();
  for (uint64_t seed = 0; seed < 20; ++seed) {
    const auto r = verify_block(b.view(), {.seed = seed});
    EXPECT_EQ(r.n_accepted[1], 2);
    EXPECT_EQ(r.n_accepted[3], 2);
    EXPECT_THAT(r.n_accepted[2], ::testing::AnyOf(1, 2));  // h_1 = 1
    EXPECT_FALSE(r.lossy);
  }
}

TEST(VerifyBlock, NoDraftsEmitsTheBonus) {
  OwnedChainBatch b(1, 2, 3);
  for (int64_t i = 0; i <= 2; ++i) fill_row(b.target_row(0, i), {0, 0, 1});
  for (int64_t i = 0; i < 2; ++i) fill_row(b.draft_row(0, i), {1, 1, 1});
  b.n_draft = {0};
  b.draft_tokens = {0, 0};
  const auto r = verify_block(b.view(), {.seed = 4});
  EXPECT_THAT(r.emitted_tokens, ElementsAre(2, -1, -1));
  EXPECT_EQ(r.n_accepted[0], 0);
}

TEST(VerifyBlock, ResidualUsesTheWeightedTarget) {
  // γ = 2, x = (1, 2) on V = 3: p_1 = (0, 1/2, 1/2), q_1 = (0, 1, 0): w_1 = 1/2. With
  // p_2 = (1/2, 1/2, 0), q_2 = (0, 1/4, 3/4): w_1·p_2 − q_2 = (1/4, 0, −3/4), so the residual at
  // τ = 1 is (1, 0, 0), while the unweighted p_2 − q_2 = (1/2, 1/4, −3/4) would give
  // (2/3, 1/3, 0): token 1 comes only from an unweighted residual. Z_1 = 1/4, h_1 = (1/4)/(1/4 +
  // 1/2) = 1/3; w_2 = 0 (p_2(2) = 0), so τ ≤ 1. Over 300 seeds τ = 1 about 100 times; an
  // unweighted residual would emit token 1 in none of them with probability (2/3)^100 ≈ 2e-18.
  OwnedChainBatch b(1, 2, 3);
  fill_row(b.target_row(0, 0), {0, 1, 1});
  fill_row(b.target_row(0, 1), {1, 1, 0});
  fill_row(b.target_row(0, 2), {1, 1, 1});
  fill_row(b.draft_row(0, 0), {0, 1, 0});
  fill_row(b.draft_row(0, 1), {0, 1, 3});
  b.draft_tokens = {1, 2};
  const auto w = block_weights(b.view(), 0);
  EXPECT_NEAR(w.w[1], 0.5, 1e-7);
  EXPECT_NEAR(w.w[2], 0.0, 1e-7);  // p_2(2) = 0
  EXPECT_NEAR(w.h[1], 0.25 / (0.25 + 0.5), 1e-7);
  int64_t tau_one = 0;
  for (uint64_t seed = 0; seed < 300; ++seed) {
    const auto r = verify_block(b.view(), {.seed = seed});
    ASSERT_LE(r.n_accepted[0], 1);
    if (r.n_accepted[0] == 1) {
      ++tau_one;
      EXPECT_EQ(r.emitted_tokens[1], 0) << "seed " << seed;
    }
  }
  EXPECT_GT(tau_one, 50);
}

TEST(VerifyBlock, BadInputIsRejectedWithItsLocation) {
  auto b = spec_vector_blocks();
  b.draft_row(1, 1)[0] = std::nanf("");
  EXPECT_THAT(error_of(b), HasSubstr("probs_draft row 3 (request 1, position 2)"));

  b = spec_vector_blocks();
  b.target_row(2, 2)[1] = 0.9f;
  EXPECT_THAT(error_of(b), HasSubstr("probs_target row 8 (request 2, position 3) sums to"));

  b = spec_vector_blocks();
  b.token(3, 1) = 2;
  EXPECT_THAT(error_of(b), HasSubstr("draft_tokens[3, 1] (request 3, position 2) is 2"));

  b = spec_vector_blocks();
  b.n_draft = {0, 3, 1, 1};
  EXPECT_THAT(error_of(b), HasSubstr("n_draft[1] (request 1) is 3"));

  b = spec_vector_blocks();
  b.probs_draft.pop_back();
  EXPECT_THAT(error_of(b), HasSubstr("probs_draft has 15 values; expected"));

  OwnedChainBatch empty(0, 2, 2);
  EXPECT_THAT(error_of(empty), HasSubstr("batch size B is 0"));
  OwnedChainBatch negative_gamma(1, 0, 2);
  negative_gamma.gamma = -1;
  EXPECT_THAT(error_of(negative_gamma), HasSubstr("gamma is -1"));
}

TEST(VerifyBlock, ResidualWeightAtOneIsV1s) {
  for (float p : {0.0f, 0.1f, 0.3f, 0.7f, 1.0f}) {
    for (float q : {0.0f, 0.2f, 0.3f, 0.9f}) {
      EXPECT_EQ(block_residual_fixed(1.0f, p, q), residual_fixed(p, q, 1.0f));
    }
  }
}

}  // namespace
}  // namespace speclab
