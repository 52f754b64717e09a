// Typical acceptance of docs/verifiers.md V4 (Medusa, Cai et al. 2024): accept draft x iff
// p_T(x) > min(ε, δ·exp(−H(p_T))); the accepted length is the longest run of passes. LOSSY: the
// output is not plain decoding's, and every result says so. Batched like the chain verifiers.
#pragma once

#include <cstdint>
#include <span>

#include "core/verify/verify_chain.hpp"

namespace speclab {

/// Medusa's defaults (posterior_threshold 0.09, posterior_alpha 0.3).
inline constexpr double kTypicalEpsilon = 0.09;
inline constexpr double kTypicalDelta = 0.3;

struct TypicalParams {
  double epsilon = kTypicalEpsilon;  ///< ε > 0, the hard threshold (Medusa's posterior_threshold)
  double delta = kTypicalDelta;  ///< δ > 0, the entropy-adaptive factor (Medusa's posterior_alpha)
  uint64_t seed = 0;
  uint32_t step = 0;  ///< decoding step, part of every uniform's address
};

/// min(ε, δ·exp(−H)) with H = −Σ p ln(p + 1e-5), in double, summed in token order.
/// @param[in] probs_target [V] p_T, the target row at the step's temperature (after the pipeline)
double typical_threshold(std::span<const float> probs_target, double epsilon, double delta);

/// Throws InvalidInput unless ε and δ are finite and > 0.
void validate_typical_params(double epsilon, double delta);

/// Throws InvalidInput unless ε and δ are finite and > 0, then checks the batch as
/// validate_chain_batch does (probs_draft may be empty: V4 never reads q).
void validate_typical_batch(const ChainBatch& batch, const TypicalParams& params);

/// The reference: n = the longest run of passes among the first n_draft[b] drafts; the token after
/// it is drawn from p_{n+1} (Medusa samples it from the base model), at position n+1 with
/// kResidualSample when n < γ_b and kBonusSample when n = γ_b, in fixed point. No uniform decides
/// acceptance. lossy is always true; residual_fallback is never set.
ChainResult verify_typical(const ChainBatch& batch, const TypicalParams& params);

}  // namespace speclab
