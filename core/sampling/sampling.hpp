// The sampling pipeline of docs/verifiers.md: logits -> temperature (T = 0 is greedy) -> top-k ->
// top-p -> min-p -> probabilities; validation of probability rows; categorical sampling from a
// uniform.
#pragma once

#include <cstdint>
#include <span>
#include <string_view>
#include <vector>

#include "core/base/rules.hpp"

namespace speclab {

/// Parameters of the sampling pipeline. Defaults leave the distribution unchanged (T = 1).
struct SamplingParams {
  double temperature = 1.0;  ///< ≥ 0; 0 means greedy (one-hot at the argmax, lowest id on ties)
  int64_t top_k = 0;         ///< keep the k most probable tokens; 0 = off
  double top_p = 1.0;        ///< keep the smallest most-probable set with mass ≥ top_p; (0, 1]
  double min_p = 0.0;        ///< keep tokens with prob ≥ min_p · max prob; [0, 1]
};

/// Throws InvalidInput naming the field when a parameter is out of range or not finite.
void validate_sampling_params(const SamplingParams& params);

/// Applies the pipeline to one row of logits.
/// Filters all act on the tempered distribution; top-p measures mass among top-k's survivors
/// (as if renormalised), min-p compares with the maximum; ties at any boundary are broken by
/// token id (the lower id is kept); the survivors are renormalised once.
/// @param[in]  logits  [V] finite or -inf (masked); at least one finite entry
/// @param[out] probs   [V] probabilities summing to 1
void probs_from_logits(std::span<const float> logits, const SamplingParams& params,
                       std::span<float> probs);
std::vector<float> probs_from_logits(std::span<const float> logits, const SamplingParams& params);

/// The tempered exponentials of a row, probs_from_logits's first step, exposed so that its
/// summation order can be checked: exps[t] = exp((logits[t] − shift)·scale) in float (core's
/// exp for non-positive arguments; arguments below −87 give 0), and the return value their sum
/// Σ exps in the normaliser's fixed block order (core/base/rules.hpp kNormaliserBlockTokens).
/// @param[in]  logits  [V] with logits[t] ≤ shift (or −inf)
/// @param[out] exps    [V]
double tempered_exponentials(std::span<const float> logits, float shift, float scale,
                             std::span<float> exps);

/// Where a probability row sits in a batch, for error messages.
struct RowLocation {
  std::string_view argument;  ///< e.g. "probs_target"
  int64_t row = 0;            ///< flat row index in the argument
  int64_t request = 0;
  int64_t position = 0;  ///< 1-based, docs/verifiers.md numbering (γ+1 is the bonus position)
};

/// Checks a probability row: every entry finite and ≥ 0, sum within 1 ± 1e-4.
/// Throws InvalidInput naming the argument, row, request, position, token and value.
void validate_probability_row(std::span<const float> row, const RowLocation& where);

/// Checks one probability value read on its own (a gathered p(x) or q(x)): finite, in [0, 1+1e-4].
void validate_probability_value(float value, int64_t token, const RowLocation& where);

/// The token that inverse-CDF sampling picks for the uniform (bits + 1/2) / 2^32 over
/// non-negative weights (need not sum to 1). Uses the exact fixed-point rule of
/// core/base/rules.hpp. Throws InvalidInput when every weight is zero in that fixed point
/// (fixed_point_total is 0), which positive weights below 2^-58 are.
int32_t sample_categorical(std::span<const float> weights, uint32_t bits);

/// Σ to_fixed(w): the total sample_categorical draws from; 0 means it has nothing to draw.
uint64_t fixed_point_total(std::span<const float> weights);

/// out[i] = exp(x[i]) for x[i] ≤ 0: the float exponential of the softmax in probs_from_logits, 16
/// lanes at a time and the tail as scalars, as the softmax computes it (inputs below -87, -inf
/// included, give 0). Exposed so that the device's copy of the polynomial can be checked against
/// it bit for bit. x and out have the same size.
void exp_nonpositive_row(std::span<const float> x, std::span<float> out);

/// Argmax with ties broken by the lowest token id (docs/verifiers.md V2).
int32_t argmax_lowest(std::span<const float> row);

/// How a token is drawn from a row at one output position (docs/randomness.md "Output positions"):
/// by inverse CDF from one uniform, or by Gumbel-max with one noise value per token.
enum class TokenSampling {
  kInverseCdf,  ///< sample_categorical with the uniform at (seed; request, t, 0, kPlainSample, 0)
  kGumbel,      ///< sample_gumbel with the noise of output position t
};

/// "inverse-cdf", "gumbel".
std::string_view to_string(TokenSampling sampling);
/// Parses a name of to_string; throws InvalidInput naming `what` and listing both names.
TokenSampling parse_token_sampling(std::string_view name, std::string_view what);

/// Gumbel-max sampling over non-negative weights: the token maximising ln w_v + G_v, computed as
/// the exponential race argmin over w_v > 0 of E_v / w_v with E_v = −ln U_v, the lowest id on
/// ties. No exponential, and a logarithm only where the bound −ln u ≥ 1 − u leaves a token able
/// to win (a few per row): one Philox call per 4 tokens and a division per token remain. U_v is the
/// uniform of word v mod 4 of philox_block at (seed; request, position, 0, kGumbelNoise, v / 4):
/// the noise of output position `position` of `request`, shared by every row drawn with it. P(v) =
/// w_v / Σ w (up to the 2^-32 grid of U). Throws InvalidInput when no weight is positive, or V ≥
/// 2^26.
int32_t sample_gumbel(std::span<const float> weights, uint64_t seed, uint32_t request,
                      uint32_t position);

/// The token at output position `position` (tokens generated before it) of `request`: plain
/// decoding's rule, which the match verifiers (core/verify/verify_match.hpp) reproduce.
int32_t sample_output_token(std::span<const float> weights, TokenSampling sampling, uint64_t seed,
                            uint32_t request, uint32_t position);

}  // namespace speclab
