// Statistics for the statistical test layer (docs/testing.md "Statistical checks"): Pearson χ²,
// power and sample size, Bonferroni, Wilson intervals, a TV upper confidence bound. Boost.Math
// supplies the χ², non-central χ² and normal distributions.
#include "core/stats/stats.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <boost/math/distributions/chi_squared.hpp>
#include <boost/math/distributions/non_central_chi_squared.hpp>
#include <boost/math/distributions/normal.hpp>
#include <cmath>
#include <limits>

#include "core/base/error.hpp"

namespace speclab {
namespace {

// Exactly known probabilities come from double arithmetic; anything further from 1 is a bug in
// the caller's distribution rather than rounding.
constexpr double kExactSumTolerance = 1e-6;

// Returns the probabilities renormalised to sum to exactly 1 (up to rounding), after checking them.
std::vector<double> checked_probs(std::span<const double> probs, const char* function) {
  if (probs.empty()) {
    throw InvalidInput(fmt::format("{}: probs is empty; expected at least one category", function));
  }
  double sum = 0.0;
  for (size_t i = 0; i < probs.size(); ++i) {
    if (!std::isfinite(probs[i]) || probs[i] < 0.0) {
      throw InvalidInput(
          fmt::format("{}: probs[{}] = {}; expected a finite value ≥ 0", function, i, probs[i]));
    }
    sum += probs[i];
  }
  if (std::abs(sum - 1.0) > kExactSumTolerance) {
    throw InvalidInput(fmt::format("{}: probs sums to {:.9g}; expected 1 ± {:g}", function, sum,
                                   kExactSumTolerance));
  }
  std::vector<double> normalised(probs.begin(), probs.end());
  for (double& p : normalised) p /= sum;
  return normalised;
}

int64_t checked_total(std::span<const int64_t> observed, size_t categories, const char* function) {
  if (observed.size() != categories) {
    throw InvalidInput(
        fmt::format("{}: observed has {} categories; expected {} (the size of probs)", function,
                    observed.size(), categories));
  }
  int64_t n = 0;
  for (size_t i = 0; i < observed.size(); ++i) {
    if (observed[i] < 0) {
      throw InvalidInput(
          fmt::format("{}: observed[{}] = {}; expected a count ≥ 0", function, i, observed[i]));
    }
    n += observed[i];
  }
  if (n <= 0) {
    throw InvalidInput(fmt::format("{}: observed sums to 0; expected N > 0", function));
  }
  return n;
}

void check_open_unit(double value, const char* function, const char* name) {
  if (!(value > 0.0 && value < 1.0)) {
    throw InvalidInput(
        fmt::format("{}: {} = {}; expected a value in (0, 1)", function, name, value));
  }
}

}  // namespace

ChiSquareBinning chi_square_bins(std::span<const double> probs_in, int64_t n, double min_expected) {
  const std::vector<double> probs = checked_probs(probs_in, "chi_square_bins");
  if (n <= 0) {
    throw InvalidInput(fmt::format("chi_square_bins: n = {}; expected n > 0", n));
  }
  ChiSquareBinning binning;
  binning.bin_of.assign(probs.size(), -1);
  std::vector<size_t> small;
  double remainder = 0.0;
  for (size_t i = 0; i < probs.size(); ++i) {
    const double expected = static_cast<double>(n) * probs[i];
    if (probs[i] == 0.0) continue;
    if (expected >= min_expected) {
      binning.bin_of[i] = static_cast<int64_t>(binning.expected.size());
      binning.expected.push_back(expected);
    } else {
      small.push_back(i);
      remainder += expected;
    }
  }
  if (small.empty()) return binning;
  int64_t remainder_bin = static_cast<int64_t>(binning.expected.size());
  if (remainder < min_expected && !binning.expected.empty()) {
    // A remainder bin too small for the χ² approximation joins the smallest proper bin, which
    // keeps that bin's expected count as close to the threshold as possible.
    remainder_bin = std::min_element(binning.expected.begin(), binning.expected.end()) -
                    binning.expected.begin();
    binning.expected[remainder_bin] += remainder;
  } else {
    binning.expected.push_back(remainder);
  }
  for (size_t i : small) binning.bin_of[i] = remainder_bin;
  return binning;
}

ChiSquareResult chi_square_test(std::span<const int64_t> observed, std::span<const double> probs,
                                double min_expected) {
  constexpr const char* kFunction = "chi_square_test";
  const std::vector<double> checked = checked_probs(probs, kFunction);
  ChiSquareResult result;
  result.n = checked_total(observed, checked.size(), kFunction);
  for (size_t i = 0; i < checked.size(); ++i) {
    if (checked[i] == 0.0 && observed[i] > 0) {
      // An impossible outcome is proof of a bug however large N is; no p-value can excuse it.
      result.statistic = std::numeric_limits<double>::infinity();
      result.p_value = 0.0;
      result.impossible_category = static_cast<int64_t>(i);
      return result;
    }
  }
  const ChiSquareBinning binning = chi_square_bins(checked, result.n, min_expected);
  result.bins = static_cast<int64_t>(binning.expected.size());
  const auto support =
      std::count_if(checked.begin(), checked.end(), [](double p) { return p > 0; });
  if (support == 1) {
    // A one-point distribution: the only possible outcome happened, which is all there is to test.
    result.bins = 1;
    result.dof = 0;
    result.statistic = 0.0;
    result.p_value = 1.0;
    return result;
  }
  if (result.bins < 2) {
    throw InvalidInput(
        fmt::format("{}: N = {} leaves {} bin(s) with expected count ≥ {}; expected at least 2 "
                    "(increase N)",
                    kFunction, result.n, result.bins, min_expected));
  }
  std::vector<double> observed_in_bin(binning.expected.size(), 0.0);
  for (size_t i = 0; i < checked.size(); ++i) {
    if (binning.bin_of[i] >= 0)
      observed_in_bin[binning.bin_of[i]] += static_cast<double>(observed[i]);
  }
  double statistic = 0.0;
  for (size_t j = 0; j < binning.expected.size(); ++j) {
    const double diff = observed_in_bin[j] - binning.expected[j];
    statistic += diff * diff / binning.expected[j];
  }
  result.statistic = statistic;
  result.dof = result.bins - 1;
  result.p_value = chi_square_p_value(statistic, result.dof);
  return result;
}

double chi_square_p_value(double statistic, int64_t dof) {
  constexpr const char* kFunction = "chi_square_p_value";
  if (dof < 1) throw InvalidInput(fmt::format("{}: dof = {}; expected at least 1", kFunction, dof));
  if (!(statistic >= 0.0) || !std::isfinite(statistic)) {
    throw InvalidInput(
        fmt::format("{}: statistic = {}; expected a finite value ≥ 0", kFunction, statistic));
  }
  const boost::math::chi_squared_distribution<double> null(static_cast<double>(dof));
  return boost::math::cdf(boost::math::complement(null, statistic));
}

double chi_square_noncentrality(int64_t bins, double alpha, double power) {
  constexpr const char* kFunction = "chi_square_noncentrality";
  if (bins < 2) {
    throw InvalidInput(fmt::format("{}: bins = {}; expected at least 2", kFunction, bins));
  }
  check_open_unit(alpha, kFunction, "alpha");
  check_open_unit(power, kFunction, "power");
  if (power <= alpha) {
    throw InvalidInput(fmt::format("{}: power = {} ≤ alpha = {}; expected power > alpha", kFunction,
                                   power, alpha));
  }
  const double dof = static_cast<double>(bins - 1);
  const double critical = boost::math::quantile(
      boost::math::complement(boost::math::chi_squared_distribution<double>(dof), alpha));
  // Solves P(χ²_dof(λ) > critical) = power for λ.
  return boost::math::non_central_chi_squared_distribution<double>::find_non_centrality(
      boost::math::complement(dof, critical, power));
}

int64_t chi_square_sample_size(int64_t bins, double epsilon, double alpha, double power) {
  if (!(epsilon > 0.0 && epsilon <= 1.0)) {
    throw InvalidInput(fmt::format(
        "chi_square_sample_size: epsilon = {}; expected a TV distance in (0, 1]", epsilon));
  }
  const double lambda = chi_square_noncentrality(bins, alpha, power);
  return static_cast<int64_t>(std::ceil(lambda / (4.0 * epsilon * epsilon)));
}

double chi_square_detectable_tv(int64_t bins, int64_t n, double alpha, double power) {
  if (n <= 0) {
    throw InvalidInput(fmt::format("chi_square_detectable_tv: n = {}; expected n > 0", n));
  }
  const double lambda = chi_square_noncentrality(bins, alpha, power);
  return std::sqrt(lambda / (4.0 * static_cast<double>(n)));
}

double bonferroni_level(double suite_rate, int64_t n_tests) {
  check_open_unit(suite_rate, "bonferroni_level", "suite_rate");
  if (n_tests < 1) {
    throw InvalidInput(fmt::format("bonferroni_level: n_tests = {}; expected ≥ 1", n_tests));
  }
  return suite_rate / static_cast<double>(n_tests);
}

Interval wilson_interval(int64_t successes, int64_t trials, double confidence) {
  constexpr const char* kFunction = "wilson_interval";
  if (trials <= 0) {
    throw InvalidInput(fmt::format("{}: trials = {}; expected > 0", kFunction, trials));
  }
  if (successes < 0 || successes > trials) {
    throw InvalidInput(fmt::format("{}: successes = {}; expected a count in [0, {}]", kFunction,
                                   successes, trials));
  }
  check_open_unit(confidence, kFunction, "confidence");
  const double z = boost::math::quantile(
      boost::math::complement(boost::math::normal_distribution<double>(), (1.0 - confidence) / 2));
  const double n = static_cast<double>(trials);
  const double p_hat = static_cast<double>(successes) / n;
  const double z2 = z * z;
  // Inverting |p̂ − p| ≤ z·sqrt(p(1 − p)/n) for p gives a quadratic whose roots are these.
  const double denominator = 1.0 + z2 / n;
  const double center = (p_hat + z2 / (2.0 * n)) / denominator;
  const double half_width =
      z / denominator * std::sqrt(p_hat * (1.0 - p_hat) / n + z2 / (4.0 * n * n));
  return {std::max(0.0, center - half_width), std::min(1.0, center + half_width)};
}

// The upper bound. Let q be the law the N counts were drawn from and p̂ the empirical law. By the
// triangle inequality TV(q, p) ≤ TV(p̂, p) + TV(p̂, q). The map from the N samples to TV(p̂, q) has
// bounded differences 1/N (moving one sample changes two counts by 1), so McDiarmid gives, with
// probability ≥ 1 − δ, TV(p̂, q) ≤ E TV(p̂, q) + sqrt(ln(1/δ) / (2N)). For the mean, Jensen on each
// |p̂_i − q_i| gives E TV(p̂, q) ≤ ½ Σ sqrt(q_i(1 − q_i)/N), and Cauchy–Schwarz over the K
// categories with Σ q_i(1 − q_i) = 1 − Σ q_i² ≤ 1 − 1/K bounds that by ½ sqrt((K − 1)/N), which
// does not depend on the unknown q. Hence, with probability ≥ 1 − δ,
//   TV(q, p) ≤ TV(p̂, p) + ½ sqrt((K − 1)/N) + sqrt(ln(1/δ) / (2N)).
TvEstimate tv_distance(std::span<const int64_t> observed, std::span<const double> probs,
                       double confidence) {
  constexpr const char* kFunction = "tv_distance";
  const std::vector<double> checked = checked_probs(probs, kFunction);
  check_open_unit(confidence, kFunction, "confidence");
  TvEstimate result;
  result.n = checked_total(observed, checked.size(), kFunction);
  const double n = static_cast<double>(result.n);
  double l1 = 0.0;
  for (size_t i = 0; i < checked.size(); ++i) {
    l1 += std::abs(static_cast<double>(observed[i]) / n - checked[i]);
  }
  result.estimate = 0.5 * l1;
  const double k = static_cast<double>(checked.size());
  const double mean_bound = 0.5 * std::sqrt((k - 1.0) / n);
  const double deviation = std::sqrt(std::log(1.0 / (1.0 - confidence)) / (2.0 * n));
  result.upper_bound = std::min(1.0, result.estimate + mean_bound + deviation);
  return result;
}

}  // namespace speclab
