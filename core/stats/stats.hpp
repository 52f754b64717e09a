// Statistics for the statistical test layer (docs/testing.md "Statistical checks"): Pearson χ²
// goodness of fit against an exactly known distribution, its power and sample size against
// alternatives at total-variation distance ε, Bonferroni levels, Wilson intervals and a TV upper
// confidence bound.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

namespace speclab {

/// Categories whose expected count is below this are merged into one remainder bin
/// (docs/testing.md).
inline constexpr double kMinExpectedPerBin = 20.0;

/// Outcome of a one-sample Pearson χ² goodness-of-fit test.
struct ChiSquareResult {
  double statistic = 0.0;  ///< Σ over bins of (O − E)² / E
  int64_t dof = 0;         ///< degrees of freedom: bins − 1
  int64_t bins = 0;        ///< bins after merging small categories
  double p_value = 1.0;    ///< P(χ²_dof ≥ statistic); 0 when impossible_category ≥ 0
  int64_t n = 0;           ///< total observations N
  int64_t impossible_category = -1;  ///< first category with probability 0 but observations
                                     ///< (an immediate failure), −1 if none

  bool impossible() const { return impossible_category >= 0; }
};

/// One-sample Pearson χ² test of observed counts against exactly known probabilities.
/// Bins: every category with expected count N·p_i ≥ min_expected is its own bin; the others are
/// merged into one remainder bin, which is itself merged into the smallest remaining bin when its
/// expected count is below min_expected. Categories of probability 0 take no bin; an observation
/// in one fails at once (p_value 0, impossible_category set).
/// @param[in] observed  [K] counts ≥ 0, N = Σ observed > 0
/// @param[in] probs     [K] finite, ≥ 0, summing to 1 within 1e-6 (renormalised)
/// Throws InvalidInput on bad arguments or when fewer than 2 bins remain (N too small).
ChiSquareResult chi_square_test(std::span<const int64_t> observed, std::span<const double> probs,
                                double min_expected = kMinExpectedPerBin);

/// The bins chi_square_test uses: bin_of[i] is category i's bin, −1 for probability-0 categories.
struct ChiSquareBinning {
  std::vector<int64_t> bin_of;   ///< [K]
  std::vector<double> expected;  ///< [bins] expected counts
};
ChiSquareBinning chi_square_bins(std::span<const double> probs, int64_t n,
                                 double min_expected = kMinExpectedPerBin);

/// Non-centrality λ at which a χ² test with `bins` bins at level `alpha` has power `power`:
/// P(χ²_{bins−1}(λ) ≥ c) = power where c is the level-alpha critical value.
double chi_square_noncentrality(int64_t bins, double alpha, double power);

/// Sample size at which the χ² test detects every alternative at total-variation distance
/// ≥ epsilon with the given power: N = ⌈λ / (4ε²)⌉. Why 4ε²: the non-centrality is
/// N·Σ(q_i − p_i)²/p_i ≥ N·(Σ|q_i − p_i|)² = 4Nε² by Cauchy–Schwarz with Σ p_i = 1.
int64_t chi_square_sample_size(int64_t bins, double epsilon, double alpha, double power);

/// The smallest TV distance detected with the given power at sample size n: sqrt(λ / (4n)).
double chi_square_detectable_tv(int64_t bins, int64_t n, double alpha, double power);

/// P(χ²_dof ≥ statistic), the p-value of a Pearson statistic with dof degrees of freedom (the
/// same rule chi_square_test applies; also for sums of independent statistics, whose degrees of
/// freedom add). dof ≥ 1, statistic ≥ 0.
double chi_square_p_value(double statistic, int64_t dof);

/// Per-test level such that n_tests tests fail falsely with probability ≤ suite_rate (union bound).
double bonferroni_level(double suite_rate, int64_t n_tests);

struct Interval {
  double lower = 0.0;
  double upper = 1.0;
};

/// Wilson score interval for a binomial proportion, two-sided at the given confidence (e.g. 0.95).
/// @param successes  in [0, trials]
/// @param trials     > 0
Interval wilson_interval(int64_t successes, int64_t trials, double confidence);

/// Total-variation distance between an empirical distribution and a known one.
struct TvEstimate {
  double estimate = 0.0;  ///< TV(p̂, p) = ½ Σ |O_i/N − p_i|, biased upwards by sampling noise
  double upper_bound = 1.0;  ///< ≥ TV(q, p) with probability ≥ confidence, q the sampled law
  int64_t n = 0;
};

/// TV(p̂, p) and an upper confidence bound on TV(q, p) for the unknown distribution q the counts
/// were drawn from. Derivation in stats.cpp.
/// @param[in] observed  [K] counts ≥ 0, N > 0
/// @param[in] probs     [K] the known distribution (as for chi_square_test)
TvEstimate tv_distance(std::span<const int64_t> observed, std::span<const double> probs,
                       double confidence);

}  // namespace speclab
