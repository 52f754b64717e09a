// core/verify/verify_typical (docs/verifiers.md V4, Medusa typical acceptance): the threshold, the
// longest run of passes, the lossy marking and every bad input with its message.
#include "core/verify/verify_typical.hpp"

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

std::string error_of(const OwnedChainBatch& b, const TypicalParams& params = {}) {
  try {
    verify_typical(b.view(), params);
  } catch (const InvalidInput& e) {
    return e.what();
  }
  return "(no error)";
}

TEST(VerifyTypical, ThresholdIsMinOfEpsilonAndEntropyTerm) {
  // Uniform over 4: H = −ln(0.25 + 1e-5) ≈ 1.38625, δ·e^−H = 0.3·0.25/(1 + 4e-5)... ≈ 0.0749997.
  const std::vector<float> uniform{0.25f, 0.25f, 0.25f, 0.25f};
  const double h = -std::log(0.25 + 1e-5);
  EXPECT_NEAR(typical_threshold(uniform, 0.09, 0.3), 0.3 * std::exp(-h), 1e-15);
  // One-hot: H = −ln(1 + 1e-5) < 0, δ·e^−H ≈ 0.3 > ε: the threshold is ε.
  EXPECT_EQ(typical_threshold(std::vector<float>{0.0f, 1.0f}, 0.09, 0.3), 0.09);
}

TEST(VerifyTypical, AcceptsTheLongestRunOfPassesAndIsLossy) {
  // p rows: (0.05, 0.95) at every position; token 0 fails (0.05 < 0.09), token 1 passes.
  OwnedChainBatch b(2, 3, 2);
  for (int64_t r = 0; r < 2; ++r) {
    for (int64_t i = 0; i <= 3; ++i) fill_row(b.target_row(r, i), {1, 19});
  }
  b.probs_draft.clear();  // V4 never reads q
  b.draft_tokens = {1, 1, 0, 1, 1, 1};
  const auto r = verify_typical(b.view(), {.seed = 5});
  EXPECT_THAT(r.n_accepted, ElementsAre(2, 3));
  EXPECT_THAT(r.accept_mask, ElementsAre(1, 1, 0, 1, 1, 1));
  EXPECT_EQ(r.emitted_tokens[0], 1);
  EXPECT_EQ(r.emitted_tokens[1], 1);
  EXPECT_GE(r.emitted_tokens[2], 0);  // drawn from p_3
  EXPECT_EQ(r.emitted_tokens[3], -1);
  EXPECT_TRUE(r.lossy);
  EXPECT_EQ(r.residual_fallbacks, 0);
}

TEST(VerifyTypical, BadInputIsRejected) {
  OwnedChainBatch b(1, 1, 2);
  for (int64_t i = 0; i <= 1; ++i) fill_row(b.target_row(0, i), {1, 1});
  fill_row(b.draft_row(0, 0), {1, 1});
  EXPECT_THAT(error_of(b, {.epsilon = 0.0}),
              HasSubstr("typical epsilon is 0; expected a finite ε > 0"));
  EXPECT_THAT(error_of(b, {.epsilon = -0.1}), HasSubstr("typical epsilon is -0.1"));
  EXPECT_THAT(error_of(b, {.epsilon = std::nan("")}), HasSubstr("typical epsilon is nan"));
  EXPECT_THAT(error_of(b, {.delta = 0.0}), HasSubstr("typical delta is 0"));
  b.target_row(0, 1)[0] = -0.5f;
  EXPECT_THAT(error_of(b), HasSubstr("probs_target row 1 (request 0, position 2)"));
  b.target_row(0, 1)[0] = 0.5f;
  b.token(0, 0) = 5;
  EXPECT_THAT(error_of(b), HasSubstr("draft_tokens[0, 0] (request 0, position 1) is 5"));
}

}  // namespace
}  // namespace speclab
