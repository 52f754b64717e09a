// Block verification of docs/verifiers.md V5 (Sun et al. 2024, "Block Verification Accelerates
// Speculative Decoding"): chain drafts, weights w_i, the last position τ whose η_i ≤ h_i, then the
// residual norm(max(0, w_τ·p_{τ+1} − q_{τ+1})) or the bonus. Lossless, never worse than V1 in
// expectation. Batched over B requests with ragged γ, on the same ChainBatch as the chain
// verifiers.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "core/base/rules.hpp"
#include "core/verify/verify_chain.hpp"

namespace speclab {

struct BlockParams {
  uint64_t seed = 0;
  uint32_t step = 0;  ///< decoding step, part of every uniform's address
};

/// The path weights and pass probabilities of one request (docs/verifiers.md V5 steps 1-2), in
/// double.
struct BlockWeights {
  std::vector<double> w;  ///< [γ_b+1] w_0 = 1, w_i = min(1, w_{i−1}·p_i(x_i)/q_i(x_i)); a draft
                          ///< with q_i(x_i) = 0 (never drawn from q) gets w_i = 0, like V1's guard
  std::vector<double> h;  ///< [γ_b+1] h_0 = 1 (unused), h_1..h_{γ_b}
};

/// w and h of request r for its first n_draft[r] positions. The batch must be valid.
BlockWeights block_weights(const ChainBatch& batch, int64_t r);

/// V5's residual row at τ < γ_b as verify_block samples it: weight t is
/// block_residual_fixed(w, p(t), q(t)) = to_fixed((w·p(t) − q(t))⁺) with w = float(w_τ)
/// (core/base/rules.hpp), so the law is norm((w·p − q)⁺) up to float rounding and the 2^-58 grid;
/// at w = 1 it is V1's chain_residual_weights bit for bit. A pure function, checked against the
/// rational formula (VerifyBlockProperty.ResidualRowMatchesRationalFormula).
std::vector<uint64_t> block_residual_weights(float weight, std::span<const float> probs_target,
                                             std::span<const float> probs_draft);

/// Checks the batch as validate_chain_batch does for V1 (shapes, γ, tokens, every row used).
void validate_block_batch(const ChainBatch& batch);

/// The reference block verifier. η_i at (seed; request, step, position i, kBlockEta); the last
/// token at position τ+1 with kResidualSample (τ < γ_b) or kBonusSample (τ = γ_b), sampled in
/// fixed point as core/sampling/sampling.cpp does. n_accepted is τ, accept_mask marks
/// positions 1..τ. A residual of zero mass after rounding (impossible in exact arithmetic,
/// proofs/v5_block.md) falls back to p_{τ+1} and is counted in residual_fallback. The result is
/// never lossy.
ChainResult verify_block(const ChainBatch& batch, const BlockParams& params);

}  // namespace speclab
