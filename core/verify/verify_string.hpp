// String-level rejection sampling (docs/verifiers.md V9 `slrs`): the verification step of a draft
// of another vocabulary that proposes one target token at a time as a byte string. Proposal i is
// target token t_i with ψ_i(t_i), the draft's probability of producing t_i there given everything
// it drew before the proposal began; ψ_i is a sub-probability over the target's tokens (a proposal
// may fail, ⊥). Accept t_i iff u_i·ψ_i(t_i) ≤ p_i(t_i); at the first rejection, or at a failed
// proposal, draw from norm(max(0, p_i − ψ_i)); after every proposal is accepted, draw the bonus
// from p_{k+1}. The output is the target's law at every temperature
// (proofs/heterogeneous_vocab.md).
//
// The residual is drawn by rejection from p: a candidate t ~ p_i is kept with probability
// max(0, 1 − ψ_i(t)/p_i(t)), so ψ_i is needed only at the candidates (a callback: the draft scores
// the candidate's string), never over the whole vocabulary; the expected number of candidates is
// 1 / Σ max(0, p_i − ψ_i), one per position on average over the steps that reach it.
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <vector>

namespace speclab {

/// Candidates a residual draw tries before it gives up and keeps its last one (a fallback the
/// result reports): reached only when Σ max(0, p − ψ) is below ~1e-5.
inline constexpr int64_t kMaxResidualCandidates = 1 << 20;

/// One request's step.
struct StringRejectionStep {
  int64_t vocab = 0;                     ///< V of the target
  std::span<const float> probs_target;   ///< [k+1, V] p_1..p_{k+1} after the sampling pipeline
  std::span<const int32_t> proposals;    ///< [k] t_1..t_k
  std::span<const double> proposal_psi;  ///< [k] ψ_i(t_i), in (0, 1]
  /// Position k+1 was a failed proposal (⊥): its token is drawn from the residual of ψ_{k+1}.
  /// Otherwise every proposal the step wanted was made and position k+1 draws the bonus from p.
  bool failed_last = false;
  /// ψ_i(t) for a residual candidate t at 0-based position i (i ≤ k).
  std::function<double(int64_t position, int32_t token)> psi;
  uint64_t seed = 0;
  uint32_t request = 0;
  uint32_t step = 0;
};

struct StringRejectionResult {
  std::vector<int32_t> emitted;  ///< the accepted proposals and one more token
  int64_t n_accepted = 0;
  bool residual_fallback = false;   ///< a residual draw gave up after kMaxResidualCandidates
  int64_t residual_candidates = 0;  ///< ψ evaluations the residual draws made
};

/// Verifies one step. Uniforms: the accept test of position i at (seed; request, step, i,
/// kAcceptTest), residual candidate j at index 2j (kResidualSample, the candidate) and 2j + 1 (its
/// keep test), the bonus at (…, k+1, kBonusSample). Throws InvalidInput naming the position for a
/// bad row, a token outside [0, V), a ψ outside (0, 1 + 1e-4] or not finite, or a callback value
/// outside [0, 1 + 1e-4].
StringRejectionResult verify_string_rejection(const StringRejectionStep& step);

}  // namespace speclab
