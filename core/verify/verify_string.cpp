// String-level rejection sampling (see verify_string.hpp).
#include "core/verify/verify_string.hpp"

#include <fmt/format.h>

#include <cmath>

#include "core/base/error.hpp"
#include "core/base/philox.hpp"
#include "core/base/rules.hpp"
#include "core/sampling/sampling.hpp"

namespace speclab {
namespace {

void check_psi(double psi, bool allow_zero, int64_t position, int32_t token) {
  const bool in_range =
      std::isfinite(psi) && psi <= 1.0 + kProbSumTolerance && (allow_zero ? psi >= 0.0 : psi > 0.0);
  if (!in_range) {
    throw InvalidInput(
        fmt::format("slrs: ψ at position {} for token {} is {}; expected a probability in {}1]",
                    position + 1, token, psi, allow_zero ? "[0, " : "(0, "));
  }
}

}  // namespace

StringRejectionResult verify_string_rejection(const StringRejectionStep& s) {
  const int64_t k = static_cast<int64_t>(s.proposals.size());
  const int64_t v = s.vocab;
  if (v < 1 || static_cast<int64_t>(s.proposal_psi.size()) != k ||
      static_cast<int64_t>(s.probs_target.size()) != (k + 1) * v) {
    throw InvalidInput(fmt::format(
        "slrs: {} proposals with {} ψ values and {} target probabilities; expected (k + 1)·V = {}",
        k, s.proposal_psi.size(), s.probs_target.size(), (k + 1) * v));
  }
  const auto row = [&](int64_t i) { return s.probs_target.subspan(i * v, v); };
  for (int64_t i = 0; i <= k; ++i) {
    validate_probability_row(row(i), RowLocation{"probs_target", i, s.request, i + 1});
  }
  const auto address = [&](int64_t i, Purpose purpose, uint32_t index) {
    return RandomAddress{s.seed, s.request, s.step, static_cast<uint32_t>(i + 1), purpose, index};
  };

  StringRejectionResult result;
  for (int64_t i = 0; i < k; ++i) {
    const int32_t t = s.proposals[i];
    if (t < 0 || t >= v) {
      throw InvalidInput(
          fmt::format("slrs: proposal {} is token {}; expected [0, {})", i + 1, t, v));
    }
    check_psi(s.proposal_psi[i], false, i, t);
    const double u = philox_uniform(address(i, Purpose::kAcceptTest, 0));
    if (u * s.proposal_psi[i] <= static_cast<double>(row(i)[t])) {
      result.emitted.push_back(t);
      result.n_accepted += 1;
      continue;
    }
    break;
  }
  const int64_t i = result.n_accepted;
  if (i == k && !s.failed_last) {
    result.emitted.push_back(
        sample_categorical(row(k), philox_bits(address(k, Purpose::kBonusSample, 0))));
    return result;
  }
  // The residual of ψ_i by rejection from p_i: candidate t kept iff u·p(t) ≤ p(t) − ψ(t).
  const std::span<const float> p = row(i);
  int32_t candidate = -1;
  for (int64_t j = 0; j < kMaxResidualCandidates; ++j) {
    const auto index = static_cast<uint32_t>(2 * j);
    candidate = sample_categorical(p, philox_bits(address(i, Purpose::kResidualSample, index)));
    const double psi = s.psi(i, candidate);
    check_psi(psi, true, i, candidate);
    result.residual_candidates += 1;
    const double pt = p[candidate];
    const double keep = philox_uniform(address(i, Purpose::kResidualSample, index + 1));
    if (keep * pt <= pt - psi) {
      result.emitted.push_back(candidate);
      return result;
    }
  }
  result.residual_fallback = true;
  result.emitted.push_back(candidate);
  return result;
}

}  // namespace speclab
