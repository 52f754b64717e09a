// Mutant names and the process-wide switch of mutant test builds (see mutants.hpp).
#include "core/base/mutants.hpp"

namespace speclab {

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
  }
  return "unknown";
}

#ifdef SPECLAB_MUTANTS
Mutant& active_mutant() {
  static Mutant active = Mutant::kNone;
  return active;
}
#endif

}  // namespace speclab
