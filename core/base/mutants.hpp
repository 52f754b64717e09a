// Deliberately broken variants of the verifiers and the engine (docs/testing.md "Mutants"). They
// are compiled in only when SPECLAB_MUTANTS is defined, which only the mutant libraries
// speclab_verify_mutants / speclab_core_mutants do; in every other build mutant() is a constant
// false and costs nothing. The regular stat and property tests, built a second time against those
// libraries, must reject each one (scripts/mutant_sweep.sh); tests/mutant/ keeps one bespoke check
// per mutant as documentation.
#pragma once

#include <span>
#include <string_view>

namespace speclab {

enum class Mutant {
  kNone,
  kResidualFromTarget,        ///< V1 residual drawn from p instead of norm(max(0, p − q))
  kDraftWarpingMismatch,      ///< the engine verifies with q at T = 1 while the draft sampled at
                              ///< its own temperature
  kMissingBonus,              ///< no bonus token when every draft is accepted
  kReusedUniform,             ///< one accept-test uniform for every position of a step
  kBlockFirstFailure,         ///< V5 τ = last position before the first failure, not the last pass
  kTopkSoftmaxQ,              ///< tree-topk verified with the draft softmax as q
  kAcceptedOffByOne,          ///< the rejected draft token is emitted as if accepted
  kBonusWithoutStep,          ///< the bonus uniform addressed without the step, so shared by a
                              ///< request's steps (V1 reference and fast path, V5, V6)
  kSworUnnormalisedResidual,  ///< tree-swor's residual p⁽ʲ⁺¹⁾ subtracts q restricted to the
                              ///< undrawn tokens but not renormalised
  kSworLastSiblingOnly,       ///< tree-swor's q⁽ʲ⁾ excludes only the last drawn sibling
  kTypicalThresholdOnce,      ///< V4's threshold computed once per request, from position 1's row
  kPlainUniformWithoutIndex,  ///< plain decoding's uniform addressed without the token index
  kTraversalStaleSiblingWeight,  ///< V7 traversal: a later sibling's weight w·P(c)/Q(c) read
                                 ///< from its parent's state before any deletion there
  kMinPUntempered,            ///< min-p compared on the T = 1 probabilities, not the tempered ones
  kTopPUntempered,            ///< top-p's mass measured on the T = 1 probabilities
  kTopPStrict,                ///< top-p stops at cumulative > top_p, not ≥
  kMinPTokenZero,             ///< min-p's threshold from token 0's probability, not the maximum
  kFloatAcceptTest,           ///< the V1 accept test u·q ≤ p decided in float, not double
  kChainSlotNoise,            ///< the chain engine addresses a request's noise by its batch slot
  kTreeSlotNoise,             ///< the tree engine addresses a request's noise by its batch slot
  kTreeDraftSampling,         ///< the tree engine drafts with the target's sampling parameters
  kFallbackFromDraft,         ///< a zero-mass residual falls back to a draw from q instead of p
  kTreeDraftWarpingMismatch,  ///< the tree engine draws at the draft's sampling parameters but
                              ///< verifies with q rows at the target's
  kKseqResidualUnscaled,      ///< K-SEQ's residual without the (1 − (1 − β)^k)/β scale
  kBlockWeightUnclamped,      ///< V5's path weight w_i = w_{i−1}·p/q without the min(1, ·)
  kMatchDraftPositionNoise,   ///< coupled / sampled-match address the noise by the draft position
                              ///< i of the step instead of the output position
  kCoupledFreshDraftNoise,    ///< the coupled engine draws the draft with its own uniform
                              ///< (inverse CDF), not the output position's Gumbel noise
  kTliUnnormalised,           ///< TLI verifies with the draft row restricted to the vocabulary
                              ///< intersection but not renormalised
  kVocabSymbolSlip,           ///< GPT-2 byte symbols read back with U+0100 + byte for the 68
                              ///< shifted bytes instead of U+0100 + their order (bytes 0x7F-0xA0
                              ///< and 0xAD: 'ġ' and 'Âł' no longer spell their bytes)
};

std::string_view to_string(Mutant mutant);

/// Every mutant but kNone, in declaration order.
std::span<const Mutant> all_mutants();

/// The mutant named `name` (to_string's spelling, "none" included); throws InvalidInput naming
/// the known names otherwise.
Mutant parse_mutant(std::string_view name);

#ifdef SPECLAB_MUTANTS
/// The mutant in force (process-wide; tests switch it with ScopedMutant). It starts as the one
/// named by the environment variable SPECLAB_MUTANT (e.g. SPECLAB_MUTANT=reused-uniform), read on
/// first use, so that a whole regular test executable runs against one mutant; an unknown name
/// ends the process with status 2 and the list of names.
Mutant& active_mutant();
inline bool mutant(Mutant m) { return active_mutant() == m; }

class ScopedMutant {
 public:
  explicit ScopedMutant(Mutant m) : saved_(active_mutant()) { active_mutant() = m; }
  ~ScopedMutant() { active_mutant() = saved_; }
  ScopedMutant(const ScopedMutant&) = delete;
  ScopedMutant& operator=(const ScopedMutant&) = delete;

 private:
  Mutant saved_;
};
#else
constexpr bool mutant(Mutant) { return false; }
#endif

}  // namespace speclab
