// The optimum of multi-draft verification as an exact linear program (docs/verifiers.md "The
// multi-draft optimum"): for k i.i.d. drafts x_1..x_k ~ q and a target p, the largest probability
// that the emitted token is one of the drafts, over every lossless verifier (every coupling of the
// drafts' law with p; Hu et al., "Towards Optimal Multi-draft Speculative Decoding", ICLR 2025).
// Solved by a dense simplex on GMP rationals, so the optimum is an exact rational.
#pragma once

#include <cstdint>
#include <map>
#include <vector>

#include "core/exact/exact.hpp"

namespace speclab::exact {

/// Size limits of the LP: it has one variable per (drafted token set S, target token y ∈ S) and
/// one constraint per set and per token: at most Σ_{s=1..k} s·C(V, s) variables and
/// Σ_{s=1..k} C(V, s) + V constraints, 512 and 170 at V = 8, k = 4.
inline constexpr int kLpMaxVocab = 8;
inline constexpr int kLpMaxDrafts = 4;

/// maximize c·x subject to a·x ≤ b, x ≥ 0, with b ≥ 0 (so x = 0 is feasible and the program is
/// bounded whenever every column of a with c_j > 0 has a positive entry).
struct LinearProgram {
  std::vector<Row> a;  ///< [m][n]
  Row b;               ///< [m], each ≥ 0
  Row c;               ///< [n]
};

struct LpSolution {
  Q value;  ///< c·x at the optimum
  Row x;    ///< [n] an optimal vertex
  int64_t pivots = 0;
};

/// The primal simplex on the slack basis with Bland's rule (lowest-index entering column, ties in
/// the ratio test to the lowest-index basic variable), which cannot cycle. Exact. Throws
/// InvalidInput for a malformed program (shapes, b < 0) and Error for an unbounded one.
LpSolution maximize(const LinearProgram& program);

/// The multi-draft optimum with its optimal coupling.
struct MultiDraftOptimum {
  int vocab = 0;
  int drafts = 0;
  /// max over lossless verifiers of P(emitted token ∈ {x_1..x_k}).
  Q acceptance;
  /// P(the set of distinct drafted tokens = S), S as a bit mask over token ids; only S of
  /// positive probability.
  std::map<uint32_t, Q> set_probability;
  /// An optimal coupling's accepted part: flow[S][y] = P(drafted set S and emitted y), y ∈ S.
  /// Completing it with the leftovers (emit y from p − Σ_S flow[S][y], normalised, when no draft
  /// is emitted) is a lossless verifier that attains `acceptance`.
  std::map<uint32_t, Row> flow;
  int64_t variables = 0, constraints = 0, pivots = 0;
};

/// Solves the LP: maximize Σ_{S, y ∈ S} π(S, y) subject to Σ_{y ∈ S} π(S, y) ≤ P(S) for every
/// drafted set S, Σ_{S ∋ y} π(S, y) ≤ p(y) for every token y, π ≥ 0. (Any such π extends to a
/// coupling of the drafts' law with p, since the unmatched masses of both sides are equal; drafts
/// with the same set of distinct tokens can emit the same tokens, so grouping tuples by their set
/// loses nothing.) For k = 1 the optimum is Σ min(p, q).
/// Throws InvalidInput naming the limit for V > kLpMaxVocab or k outside [1, kLpMaxDrafts], and
/// for rows that are not exact probability rows of one length.
MultiDraftOptimum multidraft_optimum(const Row& probs_target, const Row& probs_draft, int drafts);

}  // namespace speclab::exact
