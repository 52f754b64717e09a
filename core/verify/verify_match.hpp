// The match verifiers of docs/verifiers.md V8: the target draws its own token at each output
// position with plain decoding's rule and noise (core/sampling/sampling.hpp
// sample_output_token), and a draft token is accepted while it equals that token. The emitted
// tokens are then plain decoding's tokens, whatever the draft proposed, so a seeded run gives the
// same output with speculation on or off, with any drafter, γ or batch (proofs/match_verifiers.md).
//   coupled        the draft drew x_i with the same output position's Gumbel noise (Daliri,
//                  Musco and Suresh 2024): accepted with P[argmax(ln p + G) = argmax(ln q + G)],
//                  at least (1 − TV)/(1 + TV) per position;
//   sampled-match  the draft drew x_i with its own noise: accepted with Σ p·q per position.
// Batched over B requests with ragged γ, on the same ChainBatch as the chain verifiers; neither
// reads probs_draft.
#pragma once

#include <cstdint>
#include <span>
#include <string_view>

#include "core/sampling/sampling.hpp"
#include "core/verify/verify_chain.hpp"

namespace speclab {

enum class MatchMethod {
  kCoupled,       ///< drafts drawn with the output positions' Gumbel noise
  kSampledMatch,  ///< drafts drawn with the draft's own noise
};

struct MatchParams {
  MatchMethod method = MatchMethod::kCoupled;
  /// The target's rule at each output position: Gumbel for kCoupled (required), either for
  /// kSampledMatch (the rule plain decoding uses, so that the two emit the same tokens).
  TokenSampling sampling = TokenSampling::kGumbel;
  uint64_t seed = 0;
};

/// coupled draws every token with Gumbel noise: throws InvalidInput naming `what` (the setting
/// that chose `sampling`: "decode.sampling", a file's attribute) for kCoupled with any other rule.
/// The one statement of that rule, for configs, engines, verify-batch and verify_match.
void validate_match_sampling(MatchMethod method, TokenSampling sampling, std::string_view what);

/// Checks shapes, γ, token ids, positions (≥ 0, and position + γ_b below 2^32) and every target
/// row the batch uses; probs_draft may be empty. Throws InvalidInput naming what is wrong, and
/// for kCoupled with inverse-CDF sampling.
void validate_match_batch(const ChainBatch& batch, const MatchParams& params);

/// The output position whose noise position i (0-based) of request r's step uses:
/// positions[r] + i (mutant match-draft-position-noise: i). The drafting rule of kCoupled reads the
/// same function, so the draft and the verifier share the noise.
uint32_t match_noise_position(int64_t start, int64_t i);

/// One step: for i = 1..γ_b + 1 the target token y_i = sample_output_token(p_i, sampling, seed,
/// id, positions[r] + i − 1); draft x_i is accepted iff x_i = y_i; at the first mismatch y_i is
/// emitted, and after γ_b matches the bonus y_{γ_b+1}. Never lossy, no residual fallback.
ChainResult verify_match(const ChainBatch& batch, const MatchParams& params);

/// Per-position acceptance probabilities of the two methods for a target row p and draft row q
/// (both validated rows of one V), in double:
/// - sampled-match: Σ_v p_v·q_v;
/// - coupled: Σ_v 1 / Σ_u max(p_u/p_v, q_u/q_v) over v with p_v, q_v > 0, the exact probability
///   that the exponential races of p and q under one noise pick the same token (O(V log V): the
///   inner sum splits at the ratio q_v/p_v; about 2 ms at V = 32000 on one core, so the engines
///   keep its time out of their decoding time);
/// - coupled's lower bound (1 − TV)/(1 + TV), TV = 1 − Σ min(p, q).
double sampled_match_acceptance(std::span<const float> p, std::span<const float> q);
double coupled_acceptance(std::span<const float> p, std::span<const float> q);
double coupled_acceptance_bound(std::span<const float> p, std::span<const float> q);

/// The three at one position where Σ min(p, q) = `overlap` is already known (an engine has it
/// as V1's β): the bound is overlap / (2 − overlap), and Σ p·q is summed in coupled's pass.
struct MatchAcceptance {
  double coupled = 0.0, coupled_bound = 0.0, sampled_match = 0.0;
};
MatchAcceptance match_acceptance(std::span<const float> p, std::span<const float> q,
                                 double overlap);

}  // namespace speclab
