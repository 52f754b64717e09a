// Exact laws of tree verification (docs/verifiers.md V6) in rational arithmetic. Written from
// docs/verifiers.md alone: the candidates of a node are enumerated one at a time in draw order,
// because recursive rejection looks at c_{j+1} only after rejecting c_j and c_{j+1}'s law depends
// only on c_{<j+1}.
#include "core/exact/exact_tree.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <numeric>

#include "core/base/error.hpp"

namespace speclab::exact {
namespace {

void check_branches(TreeMethod method, int branches) {
  if (branches < 1 || branches > kMaxBranches) {
    throw InvalidInput(
        fmt::format("branches K is {} for {}; expected 1 ≤ K ≤ {} sibling candidates per node{}",
                    branches, to_string(method), kMaxBranches,
                    method == TreeMethod::kKseq ? " (K-SEQ needs k ≥ 1 drafts)" : ""));
  }
}

// docs/verifiers.md V6's constraints that do not depend on the walk: top-k needs K ≤ V, without
// replacement needs K tokens of positive draft probability in every row a node can use.
void check_rows_allow(TreeMethod method, int branches, const std::vector<Row>& draft_rows,
                      std::string_view argument) {
  for (size_t i = 0; i < draft_rows.size(); ++i) {
    const Row& q = draft_rows[i];
    if ((method == TreeMethod::kTopk || method == TreeMethod::kTopkSoftmaxQ) &&
        branches > static_cast<int>(q.size())) {
      throw InvalidInput(fmt::format("branches K = {} exceeds the vocabulary V = {} for top-k",
                                     branches, q.size()));
    }
    if (method == TreeMethod::kSwor || method == TreeMethod::kTraversal) {
      const auto support = std::count_if(q.begin(), q.end(), [](const Q& x) { return x > 0; });
      if (branches > support) {
        throw InvalidInput(fmt::format(
            "branches K = {} exceeds the support of {} row {} ({} tokens with q > 0); sampling "
            "without replacement cannot draw K distinct tokens",
            branches, argument, i, support));
      }
    }
  }
}

// Traversal enumerates every draw of the complete tree's subtrees: about (V + V² + … + V^K)^γ
// branches, so large shapes are refused rather than left running.
void check_traversal_size(TreeMethod method, int branches, int gamma, int vocab) {
  if (method != TreeMethod::kTraversal) return;
  double per_node = 0, level = 1;
  for (int j = 0; j < branches; ++j) per_node += level *= vocab;
  const double total = std::pow(per_node, gamma);
  if (total > kMaxTraversalBranches) {
    throw InvalidInput(fmt::format(
        "traversal with V = {}, K = {}, γ = {} enumerates about {:.3g} branches; expected at most "
        "{:.0e} (lower V, K or γ)",
        vocab, branches, gamma, total, kMaxTraversalBranches));
  }
}

// The top-k tokens of q, most probable first, ties to the lowest id (a stable sort).
std::vector<int> top_tokens(const Row& q, int k) {
  std::vector<int> order(q.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return q[a] > q[b]; });
  order.resize(k);
  return order;
}

// norm(max(0, p − q)); when that has no mass, p itself (the fallback docs/verifiers.md V1
// prescribes, which only the lossy variant can reach: a lossless method rejects with probability =
// the mass).
Row residual_or_p(const Row& p, const Row& q) {
  Row r(p.size());
  Q mass = 0;
  for (size_t a = 0; a < p.size(); ++a) {
    r[a] = std::max(Q(0), Q(p[a] - q[a]));
    mass += r[a];
  }
  if (mass == 0) return p;
  for (Q& value : r) value /= mass;
  return r;
}

struct TreeWalk {
  const RowAt& target;
  const RowAt& draft;
  int gamma;
  TreeMethod method;
  int branches;
  const EmitLeaf& emit;
  Sequence prefix;  // tokens of the accepted path

  void emit_from(const Row& row, const Q& mass) {
    const int depth = static_cast<int>(prefix.size());
    for (size_t a = 0; a < row.size(); ++a) {
      if (row[a] == 0) continue;
      prefix.push_back(static_cast<int>(a));
      emit(prefix, depth, Q(mass * row[a]));
      prefix.pop_back();
    }
  }

  void descend(int token, int depth, const Q& mass) {
    prefix.push_back(token);
    node(depth + 1, token, mass);
    prefix.pop_back();
  }

  // A node at `depth` whose token (or the context's last token) is `before`.
  void node(int depth, int before, const Q& mass) {
    const Row& p = target(depth, before);
    if (depth == gamma) {
      emit_from(p, mass);  // bonus
      return;
    }
    const Row& q = draft(depth, before);
    if (method == TreeMethod::kKseq) {
      kseq(depth, p, q, mass);
      return;
    }
    if (method == TreeMethod::kTraversal) throw Error("exact: traversal has its own walk");
    std::vector<char> drawn(q.size(), 0);
    const std::vector<int> top = method == TreeMethod::kTopk || method == TreeMethod::kTopkSoftmaxQ
                                     ? top_tokens(q, branches)
                                     : std::vector<int>{};
    candidate(depth, q, top, 0, p, drawn, mass);
  }

  // Candidate j (0-based) of a node; p_j is p⁽ʲ⁺¹⁾ of docs/verifiers.md V6.
  void candidate(int depth, const Row& q, const std::vector<int>& top, int j, const Row& p_j,
                 std::vector<char>& drawn, const Q& mass) {
    if (j == branches) {
      emit_from(p_j, mass);  // all rejected: one token from p⁽ᵏ⁺¹⁾
      return;
    }
    const int vocab = static_cast<int>(q.size());
    Row law(vocab, Q(0));      // the law c_j is drawn from, given c_1..c_{j-1}
    const Row* test_q = &law;  // q⁽ʲ⁾ of the accept test and residual
    switch (method) {
      case TreeMethod::kIid:
        law = q;
        break;
      case TreeMethod::kSwor: {
        Q remaining = 0;
        for (int a = 0; a < vocab; ++a) remaining += drawn[a] ? Q(0) : q[a];
        if (remaining == 0) {
          throw InvalidInput(fmt::format(
              "candidate {} at depth {}: the draft row has no mass left after {} draws without "
              "replacement",
              j + 1, depth + 1, j));
        }
        for (int a = 0; a < vocab; ++a) law[a] = drawn[a] ? Q(0) : Q(q[a] / remaining);
        break;
      }
      case TreeMethod::kTopk:
        law[top[j]] = 1;
        break;
      case TreeMethod::kTopkSoftmaxQ:
        law[top[j]] = 1;
        test_q = &q;  // the mistake under test: the softmax is not the candidate's law
        break;
      case TreeMethod::kKseq:
      case TreeMethod::kTraversal:
        throw Error("exact: K-SEQ and traversal have their own walks");
    }
    for (int c = 0; c < vocab; ++c) {
      if (law[c] == 0) continue;
      const Q accept =
          (*test_q)[c] > 0 ? std::min(Q(1), Q(p_j[c] / (*test_q)[c])) : Q(0);  // q(c) = 0 guard
      if (accept > 0) descend(c, depth, Q(mass * law[c] * accept));
      if (accept < 1) {
        const Row next = residual_or_p(p_j, *test_q);
        drawn[c] = 1;
        candidate(depth, q, top, j + 1, next, drawn, Q(mass * law[c] * (1 - accept)));
        drawn[c] = 0;
      }
    }
  }

  // SpecTr K-SEQ at one node: k i.i.d. candidates, candidate j accepted with probability
  // min(1, p(c)/(ρ q(c))) independently of the others (p is not updated), the first acceptance
  // wins; all rejected: p_res ∝ p − min(q, p/ρ)·(1 − (1−β)^k)/β.
  void kseq(int depth, const Row& p, const Row& q, const Q& mass) {
    const int vocab = static_cast<int>(q.size());
    const Q rho = kseq_rho(p, q, branches);
    const Q beta = kseq_beta(p, q, rho);
    Q reach = mass;  // P(candidates before j all rejected)
    for (int j = 0; j < branches; ++j) {
      for (int c = 0; c < vocab; ++c) {
        if (q[c] == 0) continue;
        const Q accept = std::min(Q(1), Q(p[c] / (rho * q[c])));
        if (accept > 0) descend(c, depth, Q(reach * q[c] * accept));
      }
      reach *= 1 - beta;
    }
    if (reach == 0) return;
    Q all_rejected = 1;
    for (int j = 0; j < branches; ++j) all_rejected *= 1 - beta;
    const Q scale = beta == 0 ? Q(0) : Q((1 - all_rejected) / beta);
    Row residual(vocab);
    Q total = 0;
    for (int a = 0; a < vocab; ++a) {
      residual[a] = p[a] - std::min(q[a], Q(p[a] / rho)) * scale;
      if (residual[a] < 0) {
        throw Error(fmt::format("exact: K-SEQ residual entry {} is {} < 0 at ρ = {}", a,
                                to_fraction_string(residual[a]), to_fraction_string(rho)));
      }
      total += residual[a];
    }
    // The residual's mass is exactly the all-rejected probability (proofs/v6_tree.md §4).
    if (total != all_rejected) throw Error("exact: K-SEQ residual mass is not (1−β)^k");
    for (Q& value : residual) value /= total;
    emit_from(residual, reach);
  }
};

// Traversal verification (docs/verifiers.md V7), enumerated as the process it is: the complete
// tree of depth γ with `branches` children per node, drawn without replacement from the node's q;
// the nodes visited in post-order (first child first), each once all its children are deleted;
// a node passes with probability w, which accepts the path to it and ends the step with one token
// from P; a failure deletes it and updates its parent. traverse() enumerates every draw and coin
// of a node's subtree, emits the branches that accept in it and returns the probability mass of
// those that delete it: what follows a deletion (the parent's update and its next child) depends
// on the deleted child's token only, never on how its subtree was drawn, so summing that mass over
// the subtree's branches is exact, and no property of the weights is assumed.
struct TraversalWalk {
  const RowAt& target;
  const RowAt& draft;
  int gamma;
  int branches;
  const EmitLeaf& emit;
  Sequence prefix;  // tokens of the path to the current node

  // The node at `depth` after token `before`, entered with weight w; `mass` is the probability of
  // the branch so far. Returns the mass of its branches that end with the node deleted.
  Q traverse(int depth, int before, const Q& w, const Q& mass) {
    const Row& p = target(depth, before);
    if (depth == gamma) return leaf(p, w, mass);
    const Row& q = draft(depth, before);
    std::vector<char> drawn(q.size(), 0);
    return child(depth, q, 0, w, p, drawn, mass);
  }

  // The node's test once its children are deleted: pass with w and emit one token from `law`.
  Q leaf(const Row& law, const Q& w, const Q& mass) {
    if (w > 0) {
      const int n = static_cast<int>(prefix.size());
      for (size_t a = 0; a < law.size(); ++a) {
        if (law[a] == 0) continue;
        prefix.push_back(static_cast<int>(a));
        emit(prefix, n, Q(mass * w * law[a]));
        prefix.pop_back();
      }
    }
    return Q(mass * (1 - w));
  }

  // Child j (0-based) of a node whose state is (w, P = law) and whose drawn tokens are `drawn`.
  Q child(int depth, const Row& q, int j, const Q& w, const Row& law, std::vector<char>& drawn,
          const Q& mass) {
    // All children deleted: the node is tested like a leaf. The root too, with its own w: that
    // w is 1 (proofs/v7_traversal.md) is left for the tests to see (the law's total is 1).
    if (j == branches) return leaf(law, w, mass);
    const int vocab = static_cast<int>(q.size());
    Q remaining = 0;
    for (int a = 0; a < vocab; ++a) remaining += drawn[a] ? Q(0) : q[a];
    if (remaining == 0) {
      throw InvalidInput(fmt::format(
          "candidate {} at depth {}: the draft row has no mass left after {} draws without "
          "replacement",
          j + 1, depth + 1, j));
    }
    Row current(vocab, Q(0));  // Q: the law child j is drawn from
    for (int a = 0; a < vocab; ++a) current[a] = drawn[a] ? Q(0) : Q(q[a] / remaining);
    // The parent's state after a deletion of child j: Z = Σ (w·P − Q)⁺, w' = Z/(Z + 1 − w) (1 on
    // 0/0), P' = norm((w·P − Q)⁺) (P kept when Z = 0: then w' = 0 or no deletion can happen).
    Row next(vocab);
    Q z = 0;
    for (int a = 0; a < vocab; ++a) {
      next[a] = std::max(Q(0), Q(w * law[a] - current[a]));
      z += next[a];
    }
    const Q denominator = z + 1 - w;
    const Q w_next = denominator > 0 ? Q(z / denominator) : Q(1);
    if (z > 0) {
      for (Q& value : next) value /= z;
    } else {
      next = law;
    }
    Q deleted = 0;
    for (int c = 0; c < vocab; ++c) {
      if (current[c] == 0) continue;
      const Q w_child = std::min(Q(1), Q(w * law[c] / current[c]));
      prefix.push_back(c);
      const Q child_deleted = traverse(depth + 1, c, w_child, Q(mass * current[c]));
      prefix.pop_back();
      if (child_deleted == 0) continue;
      drawn[c] = 1;
      deleted += child(depth, q, j + 1, w_next, next, drawn, child_deleted);
      drawn[c] = 0;
    }
    return deleted;
  }
};

Q kseq_f(const Row& p, const Row& q, int k, const Q& rho) {
  const Q beta = kseq_beta(p, q, rho);
  Q reject_all = 1;
  for (int j = 0; j < k; ++j) reject_all *= 1 - beta;
  return 1 - reject_all - rho * beta;
}

}  // namespace

Q kseq_beta(const Row& probs_target, const Row& probs_draft, const Q& rho) {
  Q beta = 0;
  for (size_t a = 0; a < probs_target.size(); ++a) {
    beta += std::min(probs_draft[a], Q(probs_target[a] / rho));
  }
  return beta;
}

Q kseq_rho(const Row& probs_target, const Row& probs_draft, int k) {
  if (k < 1) {
    throw InvalidInput(fmt::format("K-SEQ k is {}; expected k ≥ 1 i.i.d. drafts", k));
  }
  if (probs_target.size() != probs_draft.size()) {
    throw InvalidInput(fmt::format("probs_draft has {} entries; expected V = {} like probs_target",
                                   probs_draft.size(), probs_target.size()));
  }
  if (kseq_f(probs_target, probs_draft, k, Q(1)) <= 0) return Q(1);
  Q lo = 1, hi = k;
  for (int i = 0; i < kKseqBisections; ++i) {
    const Q mid = (lo + hi) / 2;
    if (kseq_f(probs_target, probs_draft, k, mid) <= 0) {
      hi = mid;
    } else {
      lo = mid;
    }
  }
  return hi;
}

StepLaw tree_law(TreeMethod method, int branches) {
  check_branches(method, branches);
  return [method, branches](const RowAt& target, const RowAt& draft, int gamma, int previous,
                            const EmitLeaf& emit) {
    if (method == TreeMethod::kTraversal) {
      TraversalWalk walk{target, draft, gamma, branches, emit, {}};
      walk.traverse(0, previous, Q(1), Q(1));
      return;
    }
    TreeWalk walk{target, draft, gamma, method, branches, emit, {}};
    walk.node(0, previous, Q(1));
  };
}

StepResult enumerate_tree_step(const std::vector<Row>& probs_target,
                               const std::vector<Row>& probs_draft, TreeMethod method,
                               int branches) {
  check_branches(method, branches);
  const StepLaw law = tree_law(method, branches);
  // Rows are validated first so that a bad row is reported as such, not as a branching error.
  for (size_t i = 0; i < probs_draft.size(); ++i) {
    validate_row(probs_draft[i], static_cast<int>(probs_draft[i].size()), "probs_draft",
                 static_cast<int>(i), fmt::format("depth {}", i));
  }
  check_rows_allow(method, branches, probs_draft, "probs_draft");
  check_traversal_size(method, branches, static_cast<int>(probs_draft.size()),
                       probs_target.empty() ? 0 : static_cast<int>(probs_target[0].size()));
  return enumerate_step_with(probs_target, probs_draft, law);
}

Distribution enumerate_tree_stream(const MarkovChain& target, const MarkovChain& draft, int start,
                                   int gamma, int branches, int length, TreeMethod method) {
  check_branches(method, branches);
  for (int t = 0; t < draft.vocab && t < static_cast<int>(draft.transition.size()); ++t) {
    validate_row(draft.transition[t], draft.vocab, "draft chain", t,
                 fmt::format("after token {}", t));
  }
  check_rows_allow(method, branches, draft.transition, "draft chain");
  check_traversal_size(method, branches, gamma, draft.vocab);
  return enumerate_stream_with(target, draft, start, gamma, length, tree_law(method, branches),
                               /*cap_gamma=*/false);
}

}  // namespace speclab::exact
