// Exact output distributions of tree verification (docs/verifiers.md V6: recursive rejection
// sampling with i.i.d., without-replacement and top-k candidates, the lossy top-k with softmax q,
// SpecTr K-SEQ; V7 traversal verification) by enumerating every candidate, accept/reject, residual
// and bonus branch in rational arithmetic. Independent of core/verify/verify_tree.cpp; shares only
// the method names.
#pragma once

#include <vector>

#include "core/exact/exact.hpp"
#include "core/verify/verify_tree.hpp"

namespace speclab::exact {

/// Sibling candidates per node; enumeration grows like V^K per node.
inline constexpr int kMaxBranches = 4;
/// Traversal (V7) enumerates whole subtrees: about (V + V² + … + V^K)^γ branches per step, at most
/// this many.
inline constexpr double kMaxTraversalBranches = 2e6;
/// Dyadic bisection steps of the exact K-SEQ ρ: the bracket ends within (k−1)·2^-64 of the root.
inline constexpr int kKseqBisections = 64;

/// β(ρ) = Σ_x min(q(x), p(x)/ρ) for ρ > 0.
Q kseq_beta(const Row& probs_target, const Row& probs_draft, const Q& rho);

/// K-SEQ's ρ for k candidates, exactly: the optimal ρ* solving 1 − (1−β(ρ))^k = ρ·β(ρ) is
/// irrational in general (k = 2 gives a quadratic), so this returns a rational ρ ≥ ρ* within
/// (k−1)·2^-64 of it: 1 when f(1) = 1 − (1−β(1))^k − β(1) ≤ 0, else the upper end of a dyadic
/// bisection of [1, k] that keeps f(hi) ≤ 0 exactly. Every ρ ∈ [1, k] with f(ρ) ≤ 0 makes K-SEQ
/// exactly lossless (proofs/v6_tree.md §4), so the enumeration with this ρ is an exact check; its
/// acceptance 1 − (1−β(ρ))^k is below the optimum by at most ~2^-64.
/// Throws InvalidInput for k < 1 or rows of different length.
Q kseq_rho(const Row& probs_target, const Row& probs_draft, int k);

/// The step law of tree verification: every node at depth 0..γ−1 gets `branches` candidates from
/// the draft row at that node by `method`'s law (i.i.d.; without replacement; top-k of q, ties to
/// the lowest id), verified by recursive rejection (K-SEQ for kKseq) against the target row at the
/// node; an accepted candidate's node is the next one; depth γ ends with the bonus. kTraversal
/// draws every node's candidates without replacement and verifies the complete tree by traversal
/// (docs/verifiers.md V7).
/// Throws InvalidInput (from the walk) when a without-replacement draw finds no mass left.
StepLaw tree_law(TreeMethod method, int branches);

/// One tree step with context-free rows: probs_target [γ+1][V] (row d at depth d), probs_draft
/// [γ][V]. n in the result is the depth of the accepted path. Throws InvalidInput for bad rows,
/// branches outside [1, kMaxBranches] (K-SEQ needs k ≥ 1), branches > V under top-k, or branches
/// above the draft row's support under without-replacement sampling (tree-swor, traversal), and for
/// traversal shapes above kMaxTraversalBranches.
StepResult enumerate_tree_step(const std::vector<Row>& probs_target,
                               const std::vector<Row>& probs_draft, TreeMethod method,
                               int branches);

/// The stream of tree verification over Markov chains: each step builds a depth-γ tree from the
/// last emitted token with `branches` candidates per node drawn from the draft chain's row of the
/// node's token, verifies it against the target chain, appends the path and one token, repeats;
/// cut to `length` tokens. Limits and errors as enumerate_stream and enumerate_tree_step.
Distribution enumerate_tree_stream(const MarkovChain& target, const MarkovChain& draft, int start,
                                   int gamma, int branches, int length, TreeMethod method);

}  // namespace speclab::exact
