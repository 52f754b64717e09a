// The dispatch from a registry row to its exact enumerator (see exact_step.hpp).
#include "core/exact/exact_step.hpp"

#include "core/exact/exact_tree.hpp"

namespace speclab::exact {

StepResult enumerate_step(const VerifierEntry& entry, const StepParameters& parameters,
                          const std::vector<Row>& probs_target,
                          const std::vector<Row>& probs_draft) {
  switch (entry.family) {
    case VerifierFamily::kChain:
      return enumerate_step(probs_target, probs_draft,
                            Method{entry.chain_method, parameters.leniency});
    case VerifierFamily::kBlock:
      return enumerate_step(probs_target, probs_draft, BlockMethod{});
    case VerifierFamily::kTypical:
      return enumerate_step(probs_target, probs_draft, parameters.typical);
    case VerifierFamily::kMatch:
      return enumerate_step(probs_target, probs_draft, entry.match_method);
    case VerifierFamily::kTree:
      break;
  }
  return enumerate_tree_step(probs_target, probs_draft, entry.tree_method, parameters.branches);
}

}  // namespace speclab::exact
