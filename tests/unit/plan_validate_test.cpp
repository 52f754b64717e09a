// `speclab plan --validate`'s arithmetic (bench/plan_validate.hpp): the speedup over interleaved
// rounds and its interval, the verdict of a prediction, and the term that moves a prediction most.
#include "bench/plan_validate.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "core/base/error.hpp"

namespace speclab::cli {
namespace {

using ::testing::HasSubstr;

std::string error_of(auto&& f) {
  try {
    f();
  } catch (const InvalidInput& e) {
    return e.what();
  }
  return "no InvalidInput thrown";
}

// Plain 2 s each round against speculative 1, 1.25, 0.8, 1, 2 s: ratios 2, 1.6, 2.5, 2, 1, so the
// median is 2 and the interval [1, 2.5]; five rounds all on one side of the median have
// probability 2 · 2^-5, so the interval holds it with 1 − 2^-4 = 0.9375.
TEST(PlanValidate, SpeedupOverRoundsIsTheMedianRatioWithTheOrderStatisticInterval) {
  const std::vector<double> plain(5, 2.0), spec = {1.0, 1.25, 0.8, 1.0, 2.0};
  const RoundsSpeedup s = speedup_over_rounds(plain, spec);
  EXPECT_DOUBLE_EQ(s.median, 2.0);
  EXPECT_DOUBLE_EQ(s.low, 1.0);
  EXPECT_DOUBLE_EQ(s.high, 2.5);
  EXPECT_DOUBLE_EQ(s.confidence, 0.9375);
  EXPECT_EQ(s.rounds, 5);
  // An even count: the mean of the middle two ratios (2 and 1.6 of the first four: 1.8).
  const std::vector<double> p4(4, 2.0), s4 = {1.0, 1.25, 0.8, 2.0};
  EXPECT_DOUBLE_EQ(speedup_over_rounds(p4, s4).median, 1.8);
  EXPECT_THAT(error_of([] {
                const std::vector<double> one = {1.0};
                speedup_over_rounds(one, one);
              }),
              HasSubstr("the same number ≥ 2"));
  EXPECT_THAT(error_of([] {
                const std::vector<double> a = {1.0, 0.0}, b = {1.0, 1.0};
                speedup_over_rounds(a, b);
              }),
              HasSubstr("round 1: times must be positive"));
}

// Twelve rounds with ratios 1.0, 1.1, …, 2.1 (plain times, speculative 1 s; given shuffled): the
// median is (1.5 + 1.6)/2 = 1.55. P[Binomial(12, ½) ≤ 2] = (1 + 12 + 66)/4096 = 79/4096 and
// P[≤ 3] = (79 + 220)/4096 = 299/4096, so k = 3 holds the median with 1 − 158/4096 ≈ 0.961 ≥ 0.9
// and k = 4 only with 1 − 598/4096 ≈ 0.854: the interval is the third smallest and third largest
// ratio, [1.2, 1.9], narrower than the range [1.0, 2.1]; its half-width 0.35 is 0.35/1.55 of the
// median.
TEST(PlanValidate, MoreRoundsNarrowTheIntervalAtTheSameLevel) {
  const std::vector<double> plain = {1.7, 1.0, 2.1, 1.3, 1.5, 1.9, 1.1, 2.0, 1.4, 1.6, 1.2, 1.8};
  const std::vector<double> spec(12, 1.0);
  const RoundsSpeedup s = speedup_over_rounds(plain, spec);
  EXPECT_DOUBLE_EQ(s.median, 1.55);
  EXPECT_EQ(s.k, 3);
  EXPECT_DOUBLE_EQ(s.low, 1.2);
  EXPECT_DOUBLE_EQ(s.high, 1.9);
  EXPECT_DOUBLE_EQ(s.confidence, 1.0 - 158.0 / 4096.0);
  EXPECT_NEAR(s.relative_half_width(), 0.35 / 1.55, 1e-12);
  // A level above 0.961 falls back to k = 2: P[≤ 1] = 13/4096.
  const RoundsSpeedup strict = speedup_over_rounds(plain, spec, 0.99);
  EXPECT_EQ(strict.k, 2);
  EXPECT_DOUBLE_EQ(strict.low, 1.1);
  EXPECT_DOUBLE_EQ(strict.high, 2.0);
  EXPECT_DOUBLE_EQ(strict.confidence, 1.0 - 26.0 / 4096.0);
}

// Against median 2 and interval [1, 2.5]: 2.15 is 7.5% off (within 10%), 1.7 is 15% off but
// inside the interval, 2.6 is 30% off and above it.
TEST(PlanValidate, VerdictIsWithinTenPercentFirstThenInsideTheInterval) {
  const RoundsSpeedup m{.median = 2.0, .low = 1.0, .high = 2.5, .confidence = 0.9375, .rounds = 5};
  EXPECT_EQ(judge(2.15, m), Verdict::kWithinTenPercent);
  EXPECT_EQ(judge(1.81, m), Verdict::kWithinTenPercent);
  EXPECT_EQ(judge(1.7, m), Verdict::kInsideInterval);
  EXPECT_EQ(judge(2.6, m), Verdict::kOutside);
  EXPECT_EQ(judge(0.9, m), Verdict::kOutside);
  EXPECT_EQ(verdict_name(Verdict::kInsideInterval), "inside interval");
}

// γ = 2, predicted E 2.44 (α = 0.8: 1 + 0.8 + 0.64), c 0.1, r 1.2, o 0.05, so the per-round
// speedup is 2.44 / (0.2 + 1.2 + 0.05 = 1.45). Measured E 2.19 alone: effect 2.19/2.44 − 1 =
// −0.10246; c 0.2 alone: 1.45/1.65 − 1 = −0.12121 (the largest); r 1.1 alone: 1.45/1.35 − 1 =
// +0.07407; o unchanged: 0.
TEST(PlanValidate, TermEffectsSwapOneTermAtATime) {
  const RoundTerms predicted{.emitted = 2.44, .c = 0.1, .r = 1.2, .o = 0.05};
  const RoundTerms measured{.emitted = 2.19, .c = 0.2, .r = 1.1, .o = 0.05};
  EXPECT_NEAR(per_round_speedup(predicted, 2), 2.44 / 1.45, 1e-12);
  const std::vector<TermEffect> e = term_effects(predicted, measured, 2);
  ASSERT_EQ(e.size(), 4u);
  EXPECT_EQ(e[0].term, "emitted per round E");
  EXPECT_NEAR(e[0].effect, 2.19 / 2.44 - 1.0, 1e-12);
  EXPECT_NEAR(e[1].effect, 1.45 / 1.65 - 1.0, 1e-12);
  EXPECT_NEAR(e[2].effect, 1.45 / 1.35 - 1.0, 1e-12);
  EXPECT_DOUBLE_EQ(e[3].effect, 0.0);
  EXPECT_DOUBLE_EQ(e[1].predicted, 0.1);
  EXPECT_DOUBLE_EQ(e[1].measured, 0.2);
  EXPECT_EQ(largest_effect(e).term, "draft cost c");
}

// A round emits its last token always and draft k + 1 only past drafts 1..k: accept = 0.5, 0.5
// gives 1 + 0.5 + 0.25 = 1.75, and α = 0.5 is the geometric model's match for γ = 2; accept = 1,
// 0, 1 gives 1 + 1 + 0 + 0 = 2 (the third draft is never reached). Near α = 1 the closed form
// loses digits, so α = 1 is matched to 1e-6.
TEST(PlanValidate, EmittedGivenDraftsStopsAtTheFirstRejection) {
  const std::vector<double> half = {0.5, 0.5}, gap = {1.0, 0.0, 1.0};
  EXPECT_DOUBLE_EQ(emitted_given_drafts(half), 1.75);
  EXPECT_DOUBLE_EQ(emitted_given_drafts(gap), 2.0);
  EXPECT_DOUBLE_EQ(emitted_given_drafts({}), 1.0);
  EXPECT_NEAR(alpha_for_emitted(1.75, 2), 0.5, 1e-12);
  EXPECT_NEAR(alpha_for_emitted(3.0, 2), 1.0, 1e-6);
  EXPECT_NEAR(alpha_for_emitted(1.0, 2), 0.0, 1e-12);
  EXPECT_THAT(error_of([] { alpha_for_emitted(3.5, 2); }), HasSubstr("outside [1, gamma + 1 = 3]"));
}

}  // namespace
}  // namespace speclab::cli
