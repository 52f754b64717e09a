// The laws the match verifiers rest on, by χ² against exact rationals (docs/testing.md
// "Statistical checks"): Gumbel-max sampling draws w/Σw; two rows drawn with one output
// position's noise give the joint law of proofs/match_verifiers.md §3, P(X = Y = y) = 1 / Σ_u
// max(p_u/p_y, q_u/q_y) and P(Y = y, X ≠ y) = p_y − that; and with independent noise
// (sampled-match) P(X = Y = y) = p_y·q_y. Rows are dyadic, so float and rational rows coincide.
#include <gtest/gtest.h>

#include <vector>

#include "core/base/philox.hpp"
#include "core/exact/exact.hpp"
#include "core/sampling/sampling.hpp"
#include "core/stats/stats.hpp"
#include "tests/support/stat_support.hpp"

namespace speclab {
namespace {

using exact::Q;
using testing::fits;
using testing::kStatSuiteFalseFailureRate;
using testing::report_chi_square;
using testing::stat_seed;

constexpr int kChecks = 3;  // the suite's checks share its false-failure rate
constexpr double kAlpha = kStatSuiteFalseFailureRate / kChecks;
constexpr int64_t kSamples = 400'000;

// p has a zero (never emitted), q has a zero (never drafted); both sum to 1 exactly.
const std::vector<float> kP = {0.25f, 0.125f, 0.375f, 0.0f, 0.1875f, 0.0625f};
const std::vector<float> kQ = {0.0625f, 0.5f, 0.125f, 0.125f, 0.1875f, 0.0f};

exact::Row exact_row(const std::vector<float>& row) {
  exact::Row r;
  for (float x : row) r.push_back(Q(static_cast<int>(x * 16)) / 16);
  return r;
}

TEST(MatchStat, GumbelSamplingDrawsTheRowsLaw) {
  const uint64_t seed = stat_seed("gumbel");
  std::vector<int64_t> counts(kP.size(), 0);
  for (int64_t t = 0; t < kSamples; ++t) {
    counts[sample_gumbel(kP, seed, 3, static_cast<uint32_t>(t))] += 1;
  }
  const std::vector<double> probs(kP.begin(), kP.end());
  const ChiSquareResult r = chi_square_test(counts, probs);
  report_chi_square("gumbel", r, kAlpha, seed);
  EXPECT_TRUE(fits(r, kAlpha, seed));
}

// Categories 2y (X = Y = y) and 2y + 1 (Y = y, X ≠ y), from draws of the target's token Y and the
// draft's X at one output position each.
template <class DrawPair>
void expect_joint_law(const char* label, const std::vector<Q>& both, DrawPair&& draw) {
  const uint64_t seed = stat_seed(label);
  const exact::Row p = exact_row(kP);
  std::vector<double> probs;
  for (size_t y = 0; y < kP.size(); ++y) {
    probs.push_back(both[y].convert_to<double>());
    probs.push_back(Q(p[y] - both[y]).convert_to<double>());
  }
  std::vector<int64_t> counts(probs.size(), 0);
  for (int64_t t = 0; t < kSamples; ++t) {
    const auto [y, x] = draw(seed, static_cast<uint32_t>(t));
    counts[2 * y + (x == y ? 0 : 1)] += 1;
  }
  const ChiSquareResult r = chi_square_test(counts, probs);
  report_chi_square(label, r, kAlpha, seed);
  EXPECT_TRUE(fits(r, kAlpha, seed));
}

TEST(MatchStat, SharedNoiseGivesTheCoupledJointLaw) {
  const exact::Row p = exact_row(kP), q = exact_row(kQ);
  std::vector<Q> both;
  for (size_t y = 0; y < kP.size(); ++y) {
    both.push_back(exact::coupled_agreement_at(p, q, static_cast<int>(y)));
  }
  expect_joint_law("coupled", both, [](uint64_t seed, uint32_t t) {
    return std::pair{sample_gumbel(kP, seed, 5, t), sample_gumbel(kQ, seed, 5, t)};
  });
}

TEST(MatchStat, IndependentNoiseGivesTheSampledMatchJointLaw) {
  const exact::Row p = exact_row(kP), q = exact_row(kQ);
  std::vector<Q> both;
  for (size_t y = 0; y < kP.size(); ++y) both.push_back(Q(p[y] * q[y]));
  expect_joint_law("sampled-match", both, [](uint64_t seed, uint32_t t) {
    const RandomAddress draft{seed, 5, t, 1, Purpose::kDraftSample, 0};
    return std::pair{sample_output_token(kP, TokenSampling::kInverseCdf, seed, 5, t),
                     sample_categorical(kQ, philox_bits(draft))};
  });
}

}  // namespace
}  // namespace speclab
