// Mutant names and the process-wide switch of mutant test builds (see mutants.hpp).
#include "core/base/mutants.hpp"

#include <fmt/format.h>

#include <array>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "core/base/error.hpp"

namespace speclab {

namespace {

constexpr std::array kAllMutants{
    Mutant::kResidualFromTarget,
    Mutant::kDraftWarpingMismatch,
    Mutant::kMissingBonus,
    Mutant::kReusedUniform,
    Mutant::kBlockFirstFailure,
    Mutant::kTopkSoftmaxQ,
    Mutant::kAcceptedOffByOne,
    Mutant::kBonusWithoutStep,
    Mutant::kSworUnnormalisedResidual,
    Mutant::kSworLastSiblingOnly,
    Mutant::kTypicalThresholdOnce,
    Mutant::kPlainUniformWithoutIndex,
    Mutant::kTraversalStaleSiblingWeight,
    Mutant::kMinPUntempered,
    Mutant::kTopPUntempered,
    Mutant::kTopPStrict,
    Mutant::kMinPTokenZero,
    Mutant::kFloatAcceptTest,
    Mutant::kChainSlotNoise,
    Mutant::kTreeSlotNoise,
    Mutant::kTreeDraftSampling,
    Mutant::kFallbackFromDraft,
    Mutant::kTreeDraftWarpingMismatch,
    Mutant::kKseqResidualUnscaled,
    Mutant::kBlockWeightUnclamped,
    Mutant::kMatchDraftPositionNoise,
    Mutant::kCoupledFreshDraftNoise,
    Mutant::kTliUnnormalised,
    Mutant::kVocabSymbolSlip,
};

std::string known_names() {
  std::string names = "none";
  for (Mutant m : kAllMutants) names += fmt::format(", {}", to_string(m));
  return names;
}

}  // namespace

std::string_view to_string(Mutant mutant) {
  switch (mutant) {
    case Mutant::kNone:
      return "none";
    case Mutant::kResidualFromTarget:
      return "residual-from-target";
    case Mutant::kDraftWarpingMismatch:
      return "draft-warping-mismatch";
    case Mutant::kMissingBonus:
      return "missing-bonus";
    case Mutant::kReusedUniform:
      return "reused-uniform";
    case Mutant::kBlockFirstFailure:
      return "block-first-failure";
    case Mutant::kTopkSoftmaxQ:
      return "topk-softmax-q";
    case Mutant::kAcceptedOffByOne:
      return "accepted-off-by-one";
    case Mutant::kBonusWithoutStep:
      return "bonus-without-step";
    case Mutant::kSworUnnormalisedResidual:
      return "swor-unnormalised-residual";
    case Mutant::kSworLastSiblingOnly:
      return "swor-last-sibling-only";
    case Mutant::kTypicalThresholdOnce:
      return "typical-threshold-once";
    case Mutant::kPlainUniformWithoutIndex:
      return "plain-uniform-without-index";
    case Mutant::kTraversalStaleSiblingWeight:
      return "traversal-stale-sibling-weight";
    case Mutant::kMinPUntempered:
      return "min-p-untempered";
    case Mutant::kTopPUntempered:
      return "top-p-untempered";
    case Mutant::kTopPStrict:
      return "top-p-strict";
    case Mutant::kMinPTokenZero:
      return "min-p-token-zero";
    case Mutant::kFloatAcceptTest:
      return "float-accept-test";
    case Mutant::kChainSlotNoise:
      return "chain-slot-noise";
    case Mutant::kTreeSlotNoise:
      return "tree-slot-noise";
    case Mutant::kTreeDraftSampling:
      return "tree-draft-sampling";
    case Mutant::kFallbackFromDraft:
      return "fallback-from-draft";
    case Mutant::kTreeDraftWarpingMismatch:
      return "tree-draft-warping-mismatch";
    case Mutant::kKseqResidualUnscaled:
      return "kseq-residual-unscaled";
    case Mutant::kBlockWeightUnclamped:
      return "block-weight-unclamped";
    case Mutant::kMatchDraftPositionNoise:
      return "match-draft-position-noise";
    case Mutant::kCoupledFreshDraftNoise:
      return "coupled-fresh-draft-noise";
    case Mutant::kTliUnnormalised:
      return "tli-unnormalised";
    case Mutant::kVocabSymbolSlip:
      return "vocab-symbol-slip";
  }
  return "unknown";
}

std::span<const Mutant> all_mutants() { return kAllMutants; }

Mutant parse_mutant(std::string_view name) {
  if (name == to_string(Mutant::kNone)) return Mutant::kNone;
  for (Mutant m : kAllMutants) {
    if (name == to_string(m)) return m;
  }
  throw InvalidInput(
      fmt::format("mutant \"{}\" is unknown; expected one of {}", name, known_names()));
}

#ifdef SPECLAB_MUTANTS
namespace {

// SPECLAB_MUTANT at start-up: the regular test executables built against the mutant libraries run
// whole against one mutant (scripts/mutant_sweep.sh). Said on stderr, so a log shows which.
Mutant mutant_from_environment() {
  const char* name = std::getenv("SPECLAB_MUTANT");
  if (name == nullptr || *name == '\0') return Mutant::kNone;
  try {
    const Mutant m = parse_mutant(name);
    std::fprintf(stderr, "speclab: mutant %s active (SPECLAB_MUTANT)\n", name);
    return m;
  } catch (const InvalidInput& e) {
    std::fprintf(stderr, "speclab: SPECLAB_MUTANT: %s\n", e.what());
    std::exit(2);
  }
}

}  // namespace

Mutant& active_mutant() {
  static Mutant active = mutant_from_environment();
  return active;
}
#endif

}  // namespace speclab
