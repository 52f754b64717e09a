// Rows whose residual has no mass although the drafted token is always rejected, for the tests of
// every verifier's zero-mass fallback (docs/verifiers.md V1: sample p and count the event).
#pragma once

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
struct ZeroMassRows {
  std::vector<float> p{0.0f, 0.5f, 0.25f, 0.25f - 0x1p-14f};
  std::vector<float> q{0x1p-14f, 0.5f, 0.25f, 0.25f - 0x1p-14f};
  static constexpr int32_t kDraft = 0;
};

/// p and q differ only at token 0, so their inverse-CDF draws agree for most uniforms: the first
/// seed from `from` whose residual uniform at (seed; request, step, 1, kResidualSample) draws
/// different tokens from p and from q, so a fallback from the wrong row shows.
inline uint64_t seed_telling_p_from_q(const ZeroMassRows& rows, uint32_t request, uint32_t step,
                                      uint64_t from = 1) {
  for (uint64_t seed = from;; ++seed) {
    const uint32_t bits = philox_bits({seed, request, step, 1, Purpose::kResidualSample, 0});
    if (sample_categorical(rows.p, bits) != sample_categorical(rows.q, bits)) return seed;
  }
}

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

/// The residual uniform's bits at (seed; request 0, step, position 1).
inline uint32_t residual_bits(uint64_t seed, uint32_t step) {
  return philox_bits({seed, 0, step, 1, Purpose::kResidualSample, 0});
}

}  // namespace speclab::testing
