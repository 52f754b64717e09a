// Deliberately broken variants of the verifiers and the engine (docs/testing.md "Mutants"). They
// are compiled in only when SPECLAB_MUTANTS is defined, which only the mutant test library
// speclab_core_mutants does; in every other build mutant() is a constant false and costs nothing.
// The equivalence suite must reject each one (tests/mutant/).
#pragma once

#include <string_view>

namespace speclab {

enum class Mutant {
  kNone,
  kResidualFromTarget,    ///< V1 residual drawn from p instead of norm(max(0, p − q))
  kDraftWarpingMismatch,  ///< the engine verifies with q at T = 1 while the draft sampled at
                          ///< its own temperature
  kMissingBonus,          ///< no bonus token when every draft is accepted
  kReusedUniform,         ///< one accept-test uniform for every position of a step
  kBlockFirstFailure,     ///< V5 τ = last position before the first failure, not the last pass
  kTopkSoftmaxQ,          ///< tree-topk verified with the draft softmax as q
  kAcceptedOffByOne,      ///< the rejected draft token is emitted as if accepted
};

std::string_view to_string(Mutant mutant);

#ifdef SPECLAB_MUTANTS
/// The mutant in force (process-wide; tests switch it with ScopedMutant).
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
