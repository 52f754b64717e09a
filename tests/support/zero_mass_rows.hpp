// Rows whose residual has no mass although the drafted token is always rejected, for the tests of
// every verifier's zero-mass fallback (docs/verifiers.md V1: sample p and count the event).
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <vector>

#include "core/base/philox.hpp"
#include "core/sampling/sampling.hpp"
#include "tests/support/chain_fixture.hpp"

namespace speclab::testing {

/// p(0) = 0 < q(0) = 2⁻¹⁴ and p = q elsewhere, all dyadic: q sums to exactly 1 and p to
/// 1 − 2⁻¹⁴ (within the row-sum tolerance), so q renormalised (tree-swor's q⁽¹⁾) is q itself. A
/// draft of token 0 fails every accept test (u·q(0) ≤ 0 is false; V5/V7's weight min(1, p/q) is 0)
/// and every residual max(0, w·p − q) with w ≤ 1 is zero, so the verifier falls back to p.
///
/// p and q differ only at token 0, so their inverse-CDF draws agree for most uniforms: `seed` is
/// the first one (request 0, `step`) whose residual uniform at position 1 draws different tokens
/// from p and from q, so a fallback from the wrong row shows.
struct ZeroMassRows {
  std::vector<float> p{0.0f, 0.5f, 0.25f, 0.25f - 0x1p-14f};
  std::vector<float> q{0x1p-14f, 0.5f, 0.25f, 0.25f - 0x1p-14f};
  static constexpr int32_t kDraft = 0;
  uint32_t step = 3;
  uint64_t seed = 0;
  int32_t fallback_token = -1;  ///< p's draw at the residual uniform: what the verifier emits

  ZeroMassRows() {
    for (seed = 1;; ++seed) {
      const uint32_t bits = philox_bits({seed, 0, step, 1, Purpose::kResidualSample, 0});
      fallback_token = sample_categorical(p, bits);
      if (fallback_token != sample_categorical(q, bits)) break;
    }
  }

  /// Request 0 of `res` accepted nothing, counted a fallback and emitted p's draw.
  template <class Result>
  ::testing::AssertionResult fell_back_to_target(const Result& res) const {
    if (res.n_accepted[0] != 0) {
      return ::testing::AssertionFailure() << "accepted " << res.n_accepted[0] << " drafts";
    }
    if (res.residual_fallback[0] != 1)
      return ::testing::AssertionFailure() << "no fallback counted";
    if (res.emitted_tokens[0] != fallback_token) {
      return ::testing::AssertionFailure()
             << "emitted " << res.emitted_tokens[0] << ", p's draw is " << fallback_token
             << " (seed " << seed << ")";
    }
    return ::testing::AssertionSuccess();
  }
};

/// One request, γ = 1, drafting token 0 under the rows: p at both positions (the second is the
/// bonus row), q at the first.
inline OwnedChainBatch zero_mass_chain_batch(const ZeroMassRows& rows) {
  OwnedChainBatch b(1, 1, 4);
  std::copy(rows.p.begin(), rows.p.end(), b.target_row(0, 0));
  std::copy(rows.p.begin(), rows.p.end(), b.target_row(0, 1));
  std::copy(rows.q.begin(), rows.q.end(), b.draft_row(0, 0));
  b.draft_tokens = {ZeroMassRows::kDraft};
  return b;
}

}  // namespace speclab::testing
