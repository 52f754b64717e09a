// Helpers for the statistical layer (docs/testing.md "Statistical checks"): seeds derived from the
// test name, a suite-wide false-failure budget split by Bonferroni, and the report every χ² check
// prints (N, bins, p-value, the TV ε it detects at power 0.99).
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <iostream>
#include <sstream>
#include <string>
#include <string_view>

#include "core/stats/stats.hpp"

namespace speclab::testing {

/// docs/testing.md: a statistical suite fails falsely with probability ≤ 1e-6.
inline constexpr double kStatSuiteFalseFailureRate = 1e-6;
/// Power at which every check states the TV distance it detects.
inline constexpr double kStatReportPower = 0.99;

/// FNV-1a 64: a stable hash, so a test's seed does not change between compilers or runs.
inline uint64_t fnv1a64(std::string_view text) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (unsigned char c : text) {
    h ^= c;
    h *= 0x100000001b3ull;
  }
  return h;
}

/// "Suite.Name" of the running test.
inline std::string current_test_name() {
  const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
  return info == nullptr ? std::string("?")
                         : std::string(info->test_suite_name()) + "." + info->name();
}

/// The seed of a statistical check: a hash of the test name and a label for the check. The
/// environment variable SPECLAB_STAT_SEED (an integer) is mixed in, so a nightly run draws fresh
/// seeds at the same level (docs/testing.md); without it the seed is fixed and a failure
/// reproduces.
inline uint64_t stat_seed(std::string_view label) {
  uint64_t seed = fnv1a64(current_test_name() + "/" + std::string(label));
  if (const char* extra = std::getenv("SPECLAB_STAT_SEED"); extra != nullptr && *extra != '\0') {
    seed ^= fnv1a64(extra) * 0x9e3779b97f4a7c15ull;
  }
  return seed;
}

/// Prints one line and records it as XML properties `<label>.N`, `.bins`, `.p_value`, `.eps`.
inline void report_chi_square(std::string_view label, const ChiSquareResult& r, double alpha,
                              uint64_t seed) {
  // A sample of a probability-0 category ends the test before binning (bins = 0): nothing to size.
  const double eps = r.impossible() || r.bins < 2
                         ? std::nan("")
                         : chi_square_detectable_tv(r.bins, r.n, alpha, kStatReportPower);
  std::ostringstream line;
  line << "[stat] " << current_test_name() << " " << label << ": N=" << r.n << " bins=" << r.bins
       << " chi2=" << r.statistic << " p=" << r.p_value << " alpha=" << alpha << " eps(power "
       << kStatReportPower << ")=" << eps << " seed=" << seed;
  if (r.impossible()) line << " IMPOSSIBLE category " << r.impossible_category;
  std::cout << line.str() << std::endl;
  const std::string key(label);
  ::testing::Test::RecordProperty(key + ".N", std::to_string(r.n));
  ::testing::Test::RecordProperty(key + ".bins", std::to_string(r.bins));
  std::ostringstream p, e;
  p << r.p_value;
  e << eps;
  ::testing::Test::RecordProperty(key + ".p_value", p.str());
  ::testing::Test::RecordProperty(key + ".eps", e.str());
}

/// The goodness-of-fit verdict: no sample of a probability-0 category, and p ≥ alpha.
inline ::testing::AssertionResult fits(const ChiSquareResult& r, double alpha, uint64_t seed) {
  if (r.impossible()) {
    return ::testing::AssertionFailure()
           << "category " << r.impossible_category << " has probability 0 but was sampled (seed "
           << seed << ")";
  }
  if (!(r.p_value >= alpha)) {
    return ::testing::AssertionFailure()
           << "chi2 = " << r.statistic << " on " << r.dof << " dof, p = " << r.p_value
           << " < alpha = " << alpha << " (N = " << r.n << ", seed " << seed << ")";
  }
  return ::testing::AssertionSuccess();
}

}  // namespace speclab::testing
