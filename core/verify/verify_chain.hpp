// Chain verifiers of docs/verifiers.md: V1 token-level speculative sampling (Leviathan et al. 2023
// Alg. 1, Chen et al. 2023 Alg. 2), V2 greedy verification, V3 lenient verification (lossy,
// Leviathan §A.5). Batched over B requests with ragged γ. Every uniform is addressed as
// docs/randomness.md says.
#pragma once

#include <cstdint>
#include <span>
#include <string_view>
#include <vector>

namespace speclab {

enum class ChainMethod {
  kToken,    ///< V1: lossless speculative sampling
  kGreedy,   ///< V2: accept iff the draft is the target's argmax
  kLenient,  ///< V3: lossy, accept iff u·l·q(x) ≤ p(x)
};

/// "token", "greedy", "lenient" (the names of core/verify/verifier.hpp's registry).
std::string_view to_string(ChainMethod method);
/// Parses a chain verifier's name; throws InvalidInput listing the valid names.
ChainMethod parse_chain_method(std::string_view name);
/// V3 is lossy; V1 and V2 are not (V2 is lossless with respect to greedy decoding).
bool is_lossy(ChainMethod method);

/// One batch to verify. Arrays are row-major and borrowed, not copied. γ is the padded number of
/// draft positions; request b uses its first n_draft[b] positions, the rest are padding and are
/// never read (they need not hold valid probabilities).
struct ChainBatch {
  int64_t batch = 0;                    ///< B ≥ 1
  int64_t gamma = 0;                    ///< γ ≥ 0, the padded number of draft positions
  int64_t vocab = 0;                    ///< V ≥ 1
  std::span<const float> probs_target;  ///< [B, γ+1, V] p_1..p_{γ+1} after the sampling pipeline
  std::span<const float> probs_draft;   ///< [B, γ, V] the q each draft token was drawn from;
                                        ///< may be empty for kGreedy
  std::span<const int32_t> draft_tokens;  ///< [B, γ] x_1..x_γ in [0, V)
  std::span<const int32_t> n_draft;       ///< [B] per-request γ_b in [0, γ]; empty means all γ
  std::span<const uint32_t> request_ids;  ///< [B] Philox request ids; empty means 0..B-1
  /// [B] the output position of request b's first draft token (the tokens it generated before
  /// this step); empty means 0. Read by the match verifiers only (core/verify/verify_match.hpp),
  /// whose noise is addressed by output position rather than by step.
  std::span<const int64_t> positions = {};
};

/// V3's l = 1 is V1's acceptance test.
inline constexpr double kDefaultLeniency = 1.0;

struct ChainParams {
  ChainMethod method = ChainMethod::kToken;
  double leniency = kDefaultLeniency;  ///< l in (0, 1], used by kLenient only
  uint64_t seed = 0;
  uint32_t step = 0;  ///< decoding step, part of every uniform's address
};

/// Output of one verification step.
struct ChainResult {
  int64_t batch = 0;
  int64_t gamma = 0;
  std::vector<int32_t> emitted_tokens;  ///< [B, γ+1] accepted prefix + one token, then -1
  std::vector<int32_t> n_accepted;      ///< [B] accepted draft tokens, 0..n_draft[b]
  std::vector<uint8_t> accept_mask;     ///< [B, γ] 1 where the draft token was accepted
  std::vector<uint8_t>
      residual_fallback;           ///< [B] 1 where the residual had zero mass and
                                   ///< the token was drawn from p instead (docs/verifiers.md V1)
  int64_t residual_fallbacks = 0;  ///< number of requests with residual_fallback set
  bool lossy = false;              ///< true for V3: output is not plain decoding's

  int32_t n_emitted(int64_t b) const { return n_accepted[b] + 1; }
};

/// Checks shapes, γ, token ids and every probability row the batch uses (docs/verifiers.md "Bad
/// input"). Throws InvalidInput naming the argument, request, position and value.
void validate_chain_batch(const ChainBatch& batch, const ChainParams& params);

/// The checks of validate_chain_batch that read no element, so that a device launcher can make
/// them on the host for arrays in device memory: B ≥ 1, γ ≥ 0, V ≥ 1, the length of every array
/// and the method's parameters. Throws InvalidInput as validate_chain_batch does.
void validate_chain_sizes(const ChainBatch& batch, const ChainParams& params);
/// The size-only checks of B, γ, V and the index arrays (draft_tokens, n_draft, request_ids):
/// what a launcher over logits, whose probability arrays are absent, shares with the above.
void validate_chain_index_sizes(const ChainBatch& batch);
/// V3's leniency in (0, 1] (and representable as a positive float) for kLenient.
void validate_chain_params(const ChainParams& params);

/// V1/V3's residual row as the reference samples it: weight t is residual_fixed(p(t), q(t), l) =
/// to_fixed((p(t) − l·q(t))⁺) (core/base/rules.hpp), so the law is norm((p − l·q)⁺) up to the float
/// rounding of the difference and the 2^-58 grid. A pure function, checked against the rational
/// formula (VerifyChainProperty.ResidualRowMatchesRationalFormula); l = 1 for V1.
std::vector<uint64_t> chain_residual_weights(std::span<const float> probs_target,
                                             std::span<const float> probs_draft, float leniency);

/// The reference: written to be obviously correct, validates everything first.
ChainResult verify_chain_reference(const ChainBatch& batch, const ChainParams& params);

/// The fast path: the same tokens for the same uniforms as the reference. Gathers p(x_i), q(x_i)
/// for the accept tests and reads only the one residual or bonus row each request needs, in a
/// single pass. It validates every value it reads (so a NaN never becomes a token), not the rows
/// it never needs. Requests run in parallel on the machine's cores.
ChainResult verify_chain(const ChainBatch& batch, const ChainParams& params);

}  // namespace speclab
