// Unit tests of core/stats: χ² p-values against closed-form survival functions, the merging rule,
// the sample-size table of docs/testing.md "Statistical checks", Wilson intervals and the TV bound.
#include "core/stats/stats.hpp"

#include <gtest/gtest.h>

#include <boost/math/distributions/chi_squared.hpp>
#include <boost/math/distributions/non_central_chi_squared.hpp>
#include <boost/math/distributions/normal.hpp>
#include <cmath>
#include <vector>

#include "core/base/error.hpp"

namespace speclab {
namespace {

TEST(Stats, ChiSquareTwoDofMatchesExponentialSurvival) {
  // 3 equiprobable categories, N = 300, E = 100 each: statistic (20² + 10² + 10²)/100 = 6.
  // χ² with 2 degrees of freedom is Exp(1/2), so its survival function is exp(−x/2).
  const std::vector<int64_t> observed{120, 90, 90};
  const std::vector<double> probs{1.0 / 3, 1.0 / 3, 1.0 / 3};
  const ChiSquareResult result = chi_square_test(observed, probs);
  EXPECT_NEAR(result.statistic, 6.0, 1e-12);
  EXPECT_EQ(result.dof, 2);
  EXPECT_EQ(result.bins, 3);
  EXPECT_EQ(result.n, 300);
  EXPECT_NEAR(result.p_value, std::exp(-3.0), 1e-12);
  EXPECT_FALSE(result.impossible());
}

TEST(Stats, ChiSquareOneDofMatchesNormalTail) {
  // χ²_1 is Z², so P(Z² ≥ x) = erfc(sqrt(x/2)). Observed {110, 90} against {½, ½}: statistic 2.
  const std::vector<int64_t> observed{110, 90};
  const std::vector<double> probs{0.5, 0.5};
  const ChiSquareResult result = chi_square_test(observed, probs);
  EXPECT_NEAR(result.statistic, 2.0, 1e-12);
  EXPECT_EQ(result.dof, 1);
  EXPECT_NEAR(result.p_value, std::erfc(1.0), 1e-12);
}

TEST(Stats, ChiSquareFourDofMatchesErlangSurvival) {
  // χ²_4 is Gamma(2, 2), whose survival function is exp(−x/2)(1 + x/2). Statistic (20² + 20²)/100.
  const std::vector<int64_t> observed{120, 80, 100, 100, 100};
  const std::vector<double> probs(5, 0.2);
  const ChiSquareResult result = chi_square_test(observed, probs);
  EXPECT_NEAR(result.statistic, 8.0, 1e-12);
  EXPECT_EQ(result.dof, 4);
  EXPECT_NEAR(result.p_value, std::exp(-4.0) * 5.0, 1e-12);
}

TEST(Stats, ExactlyExpectedCountsGiveZeroStatisticAndPOne) {
  const std::vector<int64_t> observed{500, 250, 125, 125};
  const std::vector<double> probs{0.5, 0.25, 0.125, 0.125};
  const ChiSquareResult result = chi_square_test(observed, probs);
  EXPECT_EQ(result.statistic, 0.0);
  EXPECT_EQ(result.p_value, 1.0);
}

TEST(Stats, SmallCategoriesMergeIntoOneRemainderBin) {
  // Expected {50, 30, 10, 5, 5}: the last three (< 20) form a remainder bin of 20, kept as is.
  const std::vector<double> probs{0.5, 0.3, 0.1, 0.05, 0.05};
  const ChiSquareBinning binning = chi_square_bins(probs, 100);
  EXPECT_EQ(binning.bin_of, (std::vector<int64_t>{0, 1, 2, 2, 2}));
  ASSERT_EQ(binning.expected.size(), 3u);
  EXPECT_NEAR(binning.expected[2], 20.0, 1e-9);

  // The statistic is computed on the merged bins: {50, 30, 8+7+5 = 20} is a perfect fit.
  const ChiSquareResult result = chi_square_test(std::vector<int64_t>{50, 30, 8, 7, 5}, probs);
  EXPECT_EQ(result.bins, 3);
  EXPECT_EQ(result.dof, 2);
  EXPECT_NEAR(result.statistic, 0.0, 1e-12);
}

TEST(Stats, SmallRemainderBinJoinsTheSmallestBin) {
  // Expected {60, 30, 5, 5}: the remainder (10) is < 20, so it joins the smallest bin (30).
  const std::vector<double> probs{0.6, 0.3, 0.05, 0.05};
  const ChiSquareBinning binning = chi_square_bins(probs, 100);
  EXPECT_EQ(binning.bin_of, (std::vector<int64_t>{0, 1, 1, 1}));
  ASSERT_EQ(binning.expected.size(), 2u);
  EXPECT_NEAR(binning.expected[0], 60.0, 1e-9);
  EXPECT_NEAR(binning.expected[1], 40.0, 1e-9);
}

TEST(Stats, ZeroProbabilityCategoriesTakeNoBin) {
  const std::vector<double> probs{0.5, 0.0, 0.5};
  const ChiSquareBinning binning = chi_square_bins(probs, 100);
  EXPECT_EQ(binning.bin_of, (std::vector<int64_t>{0, -1, 1}));
  const ChiSquareResult result = chi_square_test(std::vector<int64_t>{50, 0, 50}, probs);
  EXPECT_EQ(result.bins, 2);
  EXPECT_EQ(result.p_value, 1.0);
}

TEST(Stats, ObservationOfZeroProbabilityCategoryFailsAtOnce) {
  // One impossible sample among 10⁴ fails however well the rest fit.
  const std::vector<int64_t> observed{5000, 4999, 1};
  const std::vector<double> probs{0.5, 0.5, 0.0};
  const ChiSquareResult result = chi_square_test(observed, probs);
  EXPECT_TRUE(result.impossible());
  EXPECT_EQ(result.impossible_category, 2);
  EXPECT_EQ(result.p_value, 0.0);
  EXPECT_TRUE(std::isinf(result.statistic));
}

TEST(Stats, OnePointDistributionPassesWhenOnlyItsPointIsSeen) {
  const ChiSquareResult result =
      chi_square_test(std::vector<int64_t>{0, 7, 0}, std::vector<double>{0.0, 1.0, 0.0});
  EXPECT_EQ(result.p_value, 1.0);
  EXPECT_EQ(result.dof, 0);
}

TEST(Stats, TooFewBinsIsRejected) {
  // 10 categories with expected count 3 each merge into a single bin: nothing left to test.
  const std::vector<double> probs(10, 0.1);
  const std::vector<int64_t> observed(10, 3);
  EXPECT_THROW(chi_square_test(observed, probs), InvalidInput);
}

TEST(Stats, BadArgumentsAreRejected) {
  const std::vector<double> probs{0.5, 0.5};
  EXPECT_THROW(chi_square_test(std::vector<int64_t>{1, 2, 3}, probs), InvalidInput);
  EXPECT_THROW(chi_square_test(std::vector<int64_t>{50, -1}, probs), InvalidInput);
  EXPECT_THROW(chi_square_test(std::vector<int64_t>{0, 0}, probs), InvalidInput);
  EXPECT_THROW(chi_square_test(std::vector<int64_t>{50, 50}, std::vector<double>{0.5, 0.4}),
               InvalidInput);
  EXPECT_THROW(chi_square_test(std::vector<int64_t>{50, 50}, std::vector<double>{NAN, 0.5}),
               InvalidInput);
  EXPECT_THROW(chi_square_noncentrality(1, 1e-6, 0.99), InvalidInput);
  EXPECT_THROW(chi_square_noncentrality(16, 0.0, 0.99), InvalidInput);
  EXPECT_THROW(wilson_interval(11, 10, 0.95), InvalidInput);
  EXPECT_THROW(bonferroni_level(1e-6, 0), InvalidInput);
}

TEST(Stats, SampleSizesReproduceTheTestingTable) {
  // docs/testing.md: power 0.99 at α = 1e-6, N = λ / 4ε². Each entry is compared within the
  // rounding of the table (half a unit in its last printed digit).
  struct Row {
    int64_t bins;
    double epsilon;
    double table;
    double half_unit;
  };
  const Row rows[] = {{16, 0.05, 8.1e3, 50},   {16, 0.02, 50.5e3, 50},  {16, 0.01, 202e3, 500},
                      {256, 0.05, 20.3e3, 50}, {256, 0.02, 127e3, 500}, {256, 0.01, 507e3, 500}};
  for (const Row& row : rows) {
    const int64_t n = chi_square_sample_size(row.bins, row.epsilon, 1e-6, 0.99);
    EXPECT_NEAR(static_cast<double>(n), row.table, row.half_unit)
        << row.bins << " bins, ε = " << row.epsilon;
  }
  EXPECT_NEAR(chi_square_noncentrality(16, 1e-6, 0.99), 80.815, 1e-2);
  EXPECT_NEAR(chi_square_noncentrality(256, 1e-6, 0.99), 202.753, 1e-2);
}

TEST(Stats, NoncentralityGivesTheRequestedPower) {
  // One degree of freedom has a closed form: χ²_1(λ) = (Z + √λ)², so
  // P(χ²_1(λ) > c) = Φ(√λ − √c) + Φ(−√λ − √c).
  const boost::math::normal_distribution<double> normal;
  const double alpha = 0.05;
  const double c = std::pow(boost::math::quantile(boost::math::complement(normal, alpha / 2)), 2);
  const double lambda = chi_square_noncentrality(2, alpha, 0.8);
  const double power = boost::math::cdf(normal, std::sqrt(lambda) - std::sqrt(c)) +
                       boost::math::cdf(normal, -std::sqrt(lambda) - std::sqrt(c));
  EXPECT_NEAR(power, 0.8, 1e-9);
  // The textbook approximation (z_{α/2} + z_{power})² = (1.95996 + 0.84162)² ignores the second
  // tail, which is negligible here.
  EXPECT_NEAR(lambda, std::pow(1.959964 + 0.841621, 2), 1e-4);

  // Many degrees of freedom: check against Boost's non-central χ² directly.
  const double dof = 255;
  const double critical = boost::math::quantile(
      boost::math::complement(boost::math::chi_squared_distribution<double>(dof), 1e-6));
  const double lambda_256 = chi_square_noncentrality(256, 1e-6, 0.99);
  EXPECT_NEAR(
      boost::math::cdf(boost::math::complement(
          boost::math::non_central_chi_squared_distribution<double>(dof, lambda_256), critical)),
      0.99, 1e-9);
}

TEST(Stats, DetectableTvInvertsTheSampleSize) {
  const int64_t n = chi_square_sample_size(16, 0.02, 1e-6, 0.99);
  const double epsilon = chi_square_detectable_tv(16, n, 1e-6, 0.99);
  EXPECT_LE(epsilon, 0.02);
  EXPECT_NEAR(epsilon, 0.02, 1e-6);
}

TEST(Stats, BonferroniDividesTheSuiteRate) {
  EXPECT_DOUBLE_EQ(bonferroni_level(1e-6, 50), 2e-8);
  EXPECT_DOUBLE_EQ(bonferroni_level(0.05, 1), 0.05);
}

TEST(Stats, WilsonIntervalMatchesHandDerivation) {
  // 8 successes in 10 at 95%: z = 1.959964, z² = 3.841459, p̂ = 0.8.
  // centre = (p̂ + z²/2n) / (1 + z²/n) = 0.992073 / 1.384146 = 0.716740,
  // half = z/(1 + z²/n) · sqrt(p̂(1 − p̂)/n + z²/4n²) = 1.416010 · 0.160011 = 0.226577,
  // so [0.490163, 0.943317] (the published value for 8/10 is [0.4902, 0.9433]).
  const Interval interval = wilson_interval(8, 10, 0.95);
  EXPECT_NEAR(interval.lower, 0.490163, 1e-5);
  EXPECT_NEAR(interval.upper, 0.943317, 1e-5);

  // No successes: the lower end is 0 and the upper end simplifies to z²/(n + z²).
  const double z = 1.959963984540054;
  const Interval zero = wilson_interval(0, 20, 0.95);
  EXPECT_NEAR(zero.lower, 0.0, 1e-15);
  EXPECT_NEAR(zero.upper, z * z / (20 + z * z), 1e-12);
}

TEST(Stats, TvEstimateAndUpperBound) {
  // TV({0.6, 0.4}, {0.5, 0.5}) = 0.1; the bound adds ½ sqrt((K − 1)/N) + sqrt(ln(1/δ)/2N).
  const TvEstimate tv =
      tv_distance(std::vector<int64_t>{60, 40}, std::vector<double>{0.5, 0.5}, 0.95);
  EXPECT_NEAR(tv.estimate, 0.1, 1e-12);
  EXPECT_NEAR(tv.upper_bound, 0.1 + 0.5 * std::sqrt(1.0 / 100) + std::sqrt(std::log(20.0) / 200),
              1e-12);
  EXPECT_EQ(tv.n, 100);

  // More samples tighten the bound.
  const TvEstimate more =
      tv_distance(std::vector<int64_t>{6000, 4000}, std::vector<double>{0.5, 0.5}, 0.95);
  EXPECT_NEAR(more.estimate, 0.1, 1e-12);
  EXPECT_LT(more.upper_bound, tv.upper_bound);
  EXPECT_GT(more.upper_bound, more.estimate);
}

}  // namespace
}  // namespace speclab
