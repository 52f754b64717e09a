// The V = 32000 rows of the large-vocabulary statistical checks (docs/testing.md "Statistical
// checks"): one synthetic request (make_synthetic_batch: language-like rows, Σ min(p, q) ≈ 0.75 per
// position) with the draft's fixed-point prefix sums, so a draft is drawn in O(log V) by the rule
// sample_categorical uses.
#pragma once

#include <algorithm>
#include <cstdint>
#include <vector>

#include "core/base/rules.hpp"
#include "core/verify/synthetic_batch.hpp"

namespace speclab::testing {

inline constexpr int64_t kLargeVocab = 32000, kLargeGamma = 3;

struct Rows {
  ChainBatchData data;
  std::vector<std::vector<uint64_t>> draft_cdf;  // fixed-point prefix sums of q_1..q_γ
  std::vector<double> p1;                        // p_1 renormalised in double

  explicit Rows(uint64_t seed)
      : data(make_synthetic_batch(
            {.batch = 1, .gamma = kLargeGamma, .vocab = kLargeVocab, .seed = seed})) {
    for (int64_t i = 0; i < kLargeGamma; ++i) {
      std::vector<uint64_t> cdf(kLargeVocab);
      uint64_t c = 0;
      for (int64_t t = 0; t < kLargeVocab; ++t)
        cdf[t] = c += to_fixed(data.probs_draft[i * kLargeVocab + t]);
      draft_cdf.push_back(std::move(cdf));
    }
    p1.assign(data.probs_target.begin(), data.probs_target.begin() + kLargeVocab);
    double total = 0.0;
    for (double x : p1) total += x;
    for (double& x : p1) x /= total;
  }

  const float* target(int64_t i) const { return &data.probs_target[i * kLargeVocab]; }
  const float* draft(int64_t i) const { return &data.probs_draft[i * kLargeVocab]; }

  // x ~ q_i by the fixed-point rule of core/base/rules.hpp (what sample_categorical computes), by
  // binary search over the precomputed prefix sums.
  int32_t draw(int64_t i, uint32_t bits) const {
    const auto& cdf = draft_cdf[i];
    return static_cast<int32_t>(
        std::upper_bound(cdf.begin(), cdf.end(), fixed_target(bits, cdf.back())) - cdf.begin());
  }
};

/// p renormalised in double (a float row sums to 1 only within rounding).
inline std::vector<double> normalised(const float* row, int64_t vocab) {
  std::vector<double> p(row, row + vocab);
  double total = 0.0;
  for (double x : p) total += x;
  for (double& x : p) x /= total;
  return p;
}

}  // namespace speclab::testing
