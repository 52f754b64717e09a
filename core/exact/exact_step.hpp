// The one dispatch from a registry row (core/verify/verifier.hpp) to its exact enumerator, which
// `speclab exact` and the Python package call. It takes the registry entry and exact parameters
// rather than a VerifierSpec: the enumeration is in rationals, and a spec's double leniency
// cannot hold the l = 1/3 that `speclab exact --leniency 1/3` reads exactly.
#pragma once

#include <vector>

#include "core/exact/exact.hpp"
#include "core/verify/verifier.hpp"

namespace speclab::exact {

/// The parameters a step's law reads, exactly: the leniency (kLenient only), ε and δ (V4), and a
/// tree's candidates per node (the tree family only).
struct StepParameters {
  Q leniency = 1;
  TypicalMethod typical;
  int branches = 0;
};

/// One step's exact law for `entry`'s verifier: enumerate_step for the chain, block and typical
/// families, enumerate_tree_step for the trees. Rows and errors as those.
StepResult enumerate_step(const VerifierEntry& entry, const StepParameters& parameters,
                          const std::vector<Row>& probs_target,
                          const std::vector<Row>& probs_draft);

}  // namespace speclab::exact
