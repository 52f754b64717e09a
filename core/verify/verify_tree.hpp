// Tree verification of docs/verifiers.md V6: recursive rejection sampling over a flattened token
// tree per request (SpecInfer; Chen et al. multi-draft), with the candidate law declared per tree —
// i.i.d., without replacement, deterministic top-k (EAGLE-2/3) — the deliberately lossy top-k with
// the draft softmax as q, and SpecTr's K-SEQ (Sun et al. 2023) applied at every node.
#pragma once

#include <cstdint>
#include <span>
#include <string_view>
#include <vector>

namespace speclab {

/// How the sibling candidates c_1..c_k of a node were produced, which fixes the q⁽ʲ⁾ of
/// docs/verifiers.md V6.
enum class TreeMethod {
  kIid,   ///< "tree-iid": c_j i.i.d. from q; q⁽ʲ⁾ = q (SpecInfer multi-step sampling)
  kSwor,  ///< "tree-swor": drawn without replacement; q⁽ʲ⁾ = q on undrawn tokens, renormed
  kTopk,  ///< "tree-topk": deterministic top-k of q; q⁽ʲ⁾ = one-hot(c_j)
  kTopkSoftmaxQ,  ///< "tree-topk-softmax-q": top-k picks verified as if q⁽ʲ⁾ = q — LOSSY
  kKseq,          ///< "kseq": SpecTr K-SEQ, c_j i.i.d. from q, ρ-scaled acceptance
  kTraversal,     ///< "traversal": traversal verification (Weng et al. 2025), candidates drawn
                  ///< without replacement as tree-swor, accepted leaf-to-root at sequence level
};

/// "tree-iid", "tree-swor", "tree-topk", "tree-topk-softmax-q", "kseq", "traversal" (the
/// registry's names).
std::string_view to_string(TreeMethod method);
/// Parses a method name; throws InvalidInput listing the valid names.
TreeMethod parse_tree_method(std::string_view name);
/// Only kTopkSoftmaxQ is lossy (docs/verifiers.md V6: the draft softmax is not the candidates'
/// law).
bool is_lossy(TreeMethod method);
/// Whether the method reads probs_draft (every method but kTopk).
bool needs_draft_probs(TreeMethod method);

/// A batch of token trees, one per request, flattened in the layout EAGLE and SGLang use: node 0 is
/// the root (the context; it carries no token), nodes 1..n with parents[i] < i and tokens[i]. The
/// children of a node, in increasing node index, are its sibling candidates c_1..c_k in the order
/// they were drawn. Row i of probs_target is p(·| path to node i) (at a leaf: the bonus row); row i
/// of probs_draft is q(·| path to node i), the law node i's children were drawn from. Arrays are
/// row-major and borrowed. N is the padded number of nodes after the root; request b uses nodes
/// 0..n_nodes[b], the rest is padding and never read.
struct TreeBatch {
  int64_t batch = 0;                      ///< B ≥ 1
  int64_t max_nodes = 0;                  ///< N ≥ 0, nodes after the root (padded)
  int64_t vocab = 0;                      ///< V ≥ 1
  std::span<const float> probs_target;    ///< [B, N+1, V]
  std::span<const float> probs_draft;     ///< [B, N+1, V]; may be empty when no request needs it
  std::span<const int32_t> parents;       ///< [B, N+1]; entry 0 (the root) is not read
  std::span<const int32_t> tokens;        ///< [B, N+1] in [0, V); entry 0 is not read
  std::span<const int32_t> n_nodes;       ///< [B] in [0, N]; empty means all N
  std::span<const uint32_t> request_ids;  ///< [B] Philox request ids; empty means 0..B-1
  std::span<const TreeMethod> methods;    ///< [B] candidate law per tree; empty: params.method
};

struct TreeParams {
  TreeMethod method = TreeMethod::kIid;  ///< the candidate law of every tree without its own
  uint64_t seed = 0;
  uint32_t step = 0;  ///< decoding step, part of every uniform's address
};

/// Output of one verification step. The accepted path has at most N nodes, so rows are N+1 wide.
struct TreeResult {
  int64_t batch = 0;
  int64_t max_nodes = 0;
  std::vector<int32_t> emitted_tokens;     ///< [B, N+1] accepted path's tokens + one, then -1
  std::vector<int32_t> accepted_nodes;     ///< [B, N+1] node ids of the accepted path, then -1
  std::vector<int32_t> n_accepted;         ///< [B] depth of the last accepted node
  std::vector<uint8_t> residual_fallback;  ///< [B] 1 where the residual had zero mass (rounding)
                                           ///< and the token was drawn from the node's p instead
  int64_t residual_fallbacks = 0;
  bool lossy = false;  ///< true when any request used a lossy method

  int32_t n_emitted(int64_t b) const { return n_accepted[b] + 1; }
};

/// Checks shapes, the tree structure (parents[i] < i, so no cycle), token ids, sibling rules
/// (without replacement — tree-swor and traversal — and top-k: distinct tokens, at most V of them;
/// without replacement: the draft row keeps mass for every sibling) and every probability row the
/// batch uses. Throws InvalidInput naming the argument, request, node and value.
void validate_tree_batch(const TreeBatch& batch, const TreeParams& params);

/// The laws of docs/verifiers.md V6 step 1 at one node whose children hold the tokens c_1..c_k
/// (`candidates`, in draw order), in double: what verify_tree's accept tests and residual read.
struct TreeNodeLaws {
  /// [k][V] q⁽ʲ⁾, the law c_j was drawn from given c_1..c_{j−1}: q (tree-iid, K-SEQ and, wrongly
  /// on purpose, tree-topk-softmax-q), q on the tokens not drawn yet renormalised (tree-swor),
  /// one-hot(c_j) (tree-topk).
  std::vector<std::vector<double>> draft;
  /// [k+1][V] p⁽ʲ⁾·mass[j], unnormalised: p⁽¹⁾ = p as given (mass 1) and p⁽ʲ⁺¹⁾ ∝ (p⁽ʲ⁾ − q⁽ʲ⁾)⁺;
  /// where that has no mass (rounding, or the lossy variant) p⁽ʲ⁾ is kept. K-SEQ keeps p throughout
  /// (its residual is p_res, computed by the verifier).
  std::vector<std::vector<double>> residual;
  std::vector<double> mass;  ///< [k+1] Σ residual[j]
  /// Some p⁽ʲ⁺¹⁾ had no mass and p⁽ʲ⁾ was kept (never for K-SEQ): a residual drawn from what
  /// follows is the zero-mass fallback, which the verifier counts.
  bool kept_residual = false;
};

/// A pure function, checked against the rational recursion
/// (VerifyTreeProperty.NodeLawsMatchRationalRecursion). probs_draft is not read for tree-topk and
/// may then be empty. The tokens must satisfy the sibling rules validate_tree_batch checks.
TreeNodeLaws tree_node_laws(TreeMethod method, std::span<const float> probs_target,
                            std::span<const float> probs_draft,
                            std::span<const int32_t> candidates);

/// The reference verifier. Walks from the root: at each node its children are tested in order
/// (docs/verifiers.md V6 step 1; for K-SEQ u_j ≤ min(1, p(c_j)/(ρ·q(c_j))) with p fixed); the first
/// accepted child becomes the next node; if all are rejected one token is drawn from p⁽ᵏ⁺¹⁾ (K-SEQ:
/// p_res), at a leaf the bonus token from the leaf's p. Uniforms: (seed; request, step, position =
/// depth of the candidates, kAcceptTest, index = sibling number 0..k-1); the last token at position
/// depth+1 with kResidualSample or kBonusSample, index 0. p⁽ʲ⁾ is kept in double (sums in token
/// order) and sampled through fixed point like core/sampling/sampling.cpp.
/// kTraversal (docs/verifiers.md V7, traversal verification) walks the tree differently: every
/// node carries a weight w (the root 1), a target law P (its p row) and a draft law Q (its q row);
/// a child c entered from its parent gets w_c = min(1, w·P(c)/Q(c)) (0 if Q(c) = 0). The walk
/// visits the nodes in post-order (first child first): the current node, once all its children are
/// deleted, passes with u ≤ w, where u is at (seed; request, step, position = its depth,
/// kBlockEta, index = its rank among the nodes of that depth in node order); the root always
/// passes. A pass accepts the path to the node and ends the step with one token from P (the bonus
/// from p at an original leaf, kBonusSample; else the residual, kResidualSample; position
/// depth+1, index 0). A failure deletes the node and updates its parent with Z = Σ (w·P − Q)⁺:
/// w ← Z/(Z + 1 − w) (1 on 0/0), P ← norm((w·P − Q)⁺), Q ← q on the tokens not drawn yet,
/// renormalised. On a chain (one child per node) this is V5 block verification with V5's uniforms
/// and weights, token for token (the first residual of a node is V5's block_residual_weights).
TreeResult verify_tree(const TreeBatch& batch, const TreeParams& params);

/// K-SEQ's ρ ∈ [1, k] (docs/verifiers.md V6): with β(ρ) = Σ min(q, p/ρ), the root of
/// f(ρ) = 1 − (1−β(ρ))^k − ρ·β(ρ), by bisection in double to the last bit, on the rows normalised
/// in double. f decreases in ρ, f(k) ≤ 0; returns 1 when f(1) ≤ 1e-12 (p = q up to rounding) and
/// otherwise the upper end of the final bracket, so that f(ρ) ≤ 0 as computed (the residual is
/// non-negative). Throws InvalidInput for k < 1.
/// @param[in] probs_target [V]  @param[in] probs_draft [V]
double kseq_rho(std::span<const float> probs_target, std::span<const float> probs_draft, int64_t k);

/// K-SEQ's residual after all k i.i.d. drafts are rejected, unnormalised, in double:
/// p_res = max(0, p − min(q, p/ρ)·(1 − (1 − β)^k)/β) with β = Σ min(q, p/ρ) (0 where β = 0).
/// @param[in] probs_target [V]  @param[in] probs_draft [V]  @param[in] rho kseq_rho's ρ
std::vector<double> kseq_residual(std::span<const float> probs_target,
                                  std::span<const float> probs_draft, int64_t k, double rho);

}  // namespace speclab
