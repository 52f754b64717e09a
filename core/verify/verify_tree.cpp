// Reference tree verifier (docs/verifiers.md V6): recursive rejection sampling over a flattened
// token tree, and SpecTr K-SEQ at every node. Written to be obviously correct; validates everything
// first.
#include "core/verify/verify_tree.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "core/base/error.hpp"
#include "core/base/mutants.hpp"
#include "core/base/philox.hpp"
#include "core/sampling/sampling.hpp"
#include "core/verify/verify_block.hpp"

namespace speclab {

namespace {

int64_t node_count(const TreeBatch& batch, int64_t r) {
  return batch.n_nodes.empty() ? batch.max_nodes : batch.n_nodes[r];
}

uint32_t request_id(const TreeBatch& batch, int64_t r) {
  return batch.request_ids.empty() ? static_cast<uint32_t>(r) : batch.request_ids[r];
}

TreeMethod method_of(const TreeBatch& batch, const TreeParams& params, int64_t r) {
  const TreeMethod method = batch.methods.empty() ? params.method : batch.methods[r];
  return method == TreeMethod::kTopk && mutant(Mutant::kTopkSoftmaxQ) ? TreeMethod::kTopkSoftmaxQ
                                                                      : method;
}

int64_t row_index(const TreeBatch& batch, int64_t r, int64_t node) {
  return r * (batch.max_nodes + 1) + node;
}

std::span<const float> target_row(const TreeBatch& batch, int64_t r, int64_t node) {
  return batch.probs_target.subspan(row_index(batch, r, node) * batch.vocab, batch.vocab);
}

std::span<const float> draft_row(const TreeBatch& batch, int64_t r, int64_t node) {
  return batch.probs_draft.subspan(row_index(batch, r, node) * batch.vocab, batch.vocab);
}

void check_size(std::string_view argument, size_t actual, int64_t expected,
                std::string_view formula) {
  if (static_cast<int64_t>(actual) != expected) {
    throw InvalidInput(
        fmt::format("{} has {} values; expected {} = {}", argument, actual, formula, expected));
  }
}

// children[i]: the children of node i in increasing node index (draw order).
std::vector<std::vector<int32_t>> children_of(const TreeBatch& batch, int64_t r) {
  const int64_t n = node_count(batch, r);
  std::vector<std::vector<int32_t>> children(n + 1);
  for (int64_t i = 1; i <= n; ++i) {
    children[batch.parents[row_index(batch, r, i)]].push_back(static_cast<int32_t>(i));
  }
  return children;
}

std::vector<int32_t> depths_of(const TreeBatch& batch, int64_t r) {
  const int64_t n = node_count(batch, r);
  std::vector<int32_t> depth(n + 1, 0);
  for (int64_t i = 1; i <= n; ++i) depth[i] = depth[batch.parents[row_index(batch, r, i)]] + 1;
  return depth;
}

void validate_structure(const TreeBatch& batch, const TreeParams& params) {
  if (batch.batch < 1) {
    throw InvalidInput(
        fmt::format("batch size B is {}; expected at least one request", batch.batch));
  }
  if (batch.max_nodes < 0) {
    throw InvalidInput(fmt::format("max_nodes N is {}; expected N ≥ 0", batch.max_nodes));
  }
  if (batch.vocab < 1) {
    throw InvalidInput(fmt::format("vocab size V is {}; expected V ≥ 1", batch.vocab));
  }
  const int64_t b = batch.batch, n = batch.max_nodes, v = batch.vocab;
  check_size("probs_target", batch.probs_target.size(), b * (n + 1) * v,
             fmt::format("B·(N+1)·V with B={}, N={}, V={}", b, n, v));
  check_size("parents", batch.parents.size(), b * (n + 1),
             fmt::format("B·(N+1) with B={}, N={}", b, n));
  check_size("tokens", batch.tokens.size(), b * (n + 1),
             fmt::format("B·(N+1) with B={}, N={}", b, n));
  if (!batch.n_nodes.empty()) {
    check_size("n_nodes", batch.n_nodes.size(), b, "B");
    for (int64_t r = 0; r < b; ++r) {
      if (batch.n_nodes[r] < 0 || batch.n_nodes[r] > n) {
        throw InvalidInput(
            fmt::format("n_nodes[{}] (request {}) is {}; expected 0 ≤ n_nodes ≤ N = {}", r, r,
                        batch.n_nodes[r], n));
      }
    }
  }
  if (!batch.request_ids.empty()) check_size("request_ids", batch.request_ids.size(), b, "B");
  if (!batch.methods.empty()) check_size("methods", batch.methods.size(), b, "B");
  bool any_needs_draft = false;
  for (int64_t r = 0; r < b; ++r) {
    any_needs_draft = any_needs_draft || needs_draft_probs(method_of(batch, params, r));
  }
  if (any_needs_draft || !batch.probs_draft.empty()) {
    check_size("probs_draft", batch.probs_draft.size(), b * (n + 1) * v,
               fmt::format("B·(N+1)·V with B={}, N={}, V={}", b, n, v));
  }
  for (int64_t r = 0; r < b; ++r) {
    for (int64_t i = 1; i <= node_count(batch, r); ++i) {
      const int32_t parent = batch.parents[row_index(batch, r, i)];
      if (parent < 0 || parent >= i) {
        throw InvalidInput(fmt::format(
            "parents[{}, {}] (request {}, node {}) is {}; expected 0 ≤ parent < {} (nodes are in "
            "topological order, so a parent at or after its node would make a cycle)",
            r, i, r, i, parent, i));
      }
      const int32_t token = batch.tokens[row_index(batch, r, i)];
      if (token < 0 || token >= v) {
        throw InvalidInput(fmt::format(
            "tokens[{}, {}] (request {}, node {}) is {}; expected a token id in [0, {})", r, i, r,
            i, token, v));
      }
    }
  }
}

// Sibling rules of docs/verifiers.md V6 for one node's children.
void validate_siblings(const TreeBatch& batch, TreeMethod method, int64_t r, int64_t node,
                       const std::vector<int32_t>& kids) {
  const bool without_replacement = method == TreeMethod::kSwor || method == TreeMethod::kTraversal;
  const bool distinct =
      without_replacement || method == TreeMethod::kTopk || method == TreeMethod::kTopkSoftmaxQ;
  if (!distinct || kids.empty()) return;
  if (static_cast<int64_t>(kids.size()) > batch.vocab) {
    throw InvalidInput(fmt::format(
        "node {} of request {} has {} children under {}; expected at most V = {} distinct tokens",
        node, r, kids.size(), to_string(method), batch.vocab));
  }
  std::vector<int32_t> seen(batch.vocab, -1);
  for (size_t j = 0; j < kids.size(); ++j) {
    const int32_t kid = kids[j];
    const int32_t token = batch.tokens[row_index(batch, r, kid)];
    if (seen[token] >= 0) {
      throw InvalidInput(fmt::format(
          "nodes {} and {} (request {}, children of node {}) both hold token {}; {} needs "
          "distinct sibling tokens",
          seen[token], kid, r, node, token, to_string(method)));
    }
    if (without_replacement) {
      // q⁽ʲ⁾ renormalises q over the tokens not drawn before sibling j: it needs mass left.
      const auto q = draft_row(batch, r, node);
      double remaining = 0.0;
      for (int64_t t = 0; t < batch.vocab; ++t) remaining += seen[t] >= 0 ? 0.0 : q[t];
      if (!(remaining > 0.0)) {
        throw InvalidInput(fmt::format(
            "node {} (request {}, sibling {} of node {}): probs_draft row {} has no mass left "
            "after the {} earlier siblings; {} cannot have drawn it",
            kid, r, j + 1, node, row_index(batch, r, node), j, to_string(method)));
      }
    }
    seen[token] = kid;
  }
}

// validate_probability_row with the node named (its message names row, request and depth).
void validate_node_row(std::span<const float> row, const RowLocation& where, int64_t node) {
  try {
    validate_probability_row(row, where);
  } catch (const InvalidInput& e) {
    throw InvalidInput(fmt::format("{} [node {} at depth {}]", e.what(), node, where.position));
  }
}

}  // namespace

void validate_tree_batch(const TreeBatch& batch, const TreeParams& params) {
  validate_structure(batch, params);
  for (int64_t r = 0; r < batch.batch; ++r) {
    const TreeMethod method = method_of(batch, params, r);
    const auto children = children_of(batch, r);
    const auto depth = depths_of(batch, r);
    for (int64_t i = 0; i <= node_count(batch, r); ++i) {
      const int64_t row = row_index(batch, r, i);
      validate_node_row(target_row(batch, r, i), {"probs_target", row, r, depth[i]}, i);
      if (!children[i].empty() && needs_draft_probs(method)) {
        validate_node_row(draft_row(batch, r, i), {"probs_draft", row, r, depth[i]}, i);
      }
      validate_siblings(batch, method, r, i, children[i]);
    }
  }
}

namespace {
constexpr double kKseqRoundingTolerance = 1e-12;
}  // namespace

std::vector<double> kseq_residual(std::span<const float> probs_target,
                                  std::span<const float> probs_draft, int64_t k, double rho) {
  const size_t v = probs_target.size();
  double beta = 0.0;
  for (size_t t = 0; t < v; ++t) {
    beta += std::min(static_cast<double>(probs_draft[t]), probs_target[t] / rho);
  }
  // Mutant: the scale dropped, which is the residual of a single draft (right at k = 1 only).
  const double scale = mutant(Mutant::kKseqResidualUnscaled) ? 1.0
                       : beta > 0.0 ? (1.0 - std::pow(1.0 - beta, static_cast<double>(k))) / beta
                                    : 0.0;
  std::vector<double> residual(v);
  for (size_t t = 0; t < v; ++t) {
    residual[t] = std::max(
        0.0, probs_target[t] -
                 std::min(static_cast<double>(probs_draft[t]), probs_target[t] / rho) * scale);
  }
  return residual;
}

double kseq_rho(std::span<const float> probs_target, std::span<const float> probs_draft,
                int64_t k) {
  if (k < 1) throw InvalidInput(fmt::format("K-SEQ k is {}; expected k ≥ 1 i.i.d. drafts", k));
  if (probs_target.size() != probs_draft.size()) {
    throw InvalidInput(fmt::format("probs_draft has {} entries; expected V = {} like probs_target",
                                   probs_draft.size(), probs_target.size()));
  }
  // Rows normalised in double: a float row sums to 1 only within ~1e-7, and near p = q the root
  // moves by (1 − β(1))^{1/k}, so that rounding alone would push ρ visibly above 1.
  double sum_target = 0.0, sum_draft = 0.0;
  for (size_t t = 0; t < probs_target.size(); ++t) {
    sum_target += probs_target[t];
    sum_draft += probs_draft[t];
  }
  const auto f = [&](double rho) {
    double beta = 0.0;
    for (size_t t = 0; t < probs_target.size(); ++t) {
      beta += std::min(probs_draft[t] / sum_draft, probs_target[t] / sum_target / rho);
    }
    return 1.0 - std::pow(1.0 - beta, static_cast<double>(k)) - rho * beta;
  };
  // f(1) ≤ 0 means ρ = 1 (then β = ρβ ≥ 1 − (1−β)^k); a positive f(1) below 1e-12 is rounding
  // of p = q, and taking ρ = 1 there misplaces at most that much probability.
  if (f(1.0) <= kKseqRoundingTolerance) return 1.0;
  double lo = 1.0, hi = static_cast<double>(k);
  for (int i = 0; i < 200; ++i) {
    const double mid = 0.5 * (lo + hi);
    if (mid <= lo || mid >= hi) break;  // the bracket is two adjacent doubles
    (f(mid) <= 0.0 ? hi : lo) = mid;
  }
  return hi;
}

TreeNodeLaws tree_node_laws(TreeMethod method, std::span<const float> probs_target,
                            std::span<const float> probs_draft,
                            std::span<const int32_t> candidates) {
  const int64_t vocab = static_cast<int64_t>(probs_target.size());
  const int64_t k = static_cast<int64_t>(candidates.size());
  TreeNodeLaws laws;
  laws.residual.emplace_back(probs_target.begin(), probs_target.end());
  laws.mass.push_back(1.0);
  std::vector<char> drawn(vocab, 0);  // c_1..c_{j−1}
  for (int64_t j = 0; j < k; ++j) {
    const int32_t c = candidates[j];
    std::vector<double> law(vocab, 0.0);
    std::vector<double> subtracted;  // what the residual update subtracts: q⁽ʲ⁾ (mutants aside)
    switch (method) {
      case TreeMethod::kIid:
      case TreeMethod::kTopkSoftmaxQ:
      case TreeMethod::kKseq:
        law.assign(probs_draft.begin(), probs_draft.end());
        break;
      case TreeMethod::kSwor:
      case TreeMethod::kTraversal: {  // traversal's candidates are drawn as tree-swor's
        if (mutant(Mutant::kSworLastSiblingOnly)) {
          std::fill(drawn.begin(), drawn.end(), 0);
          if (j > 0) drawn[candidates[j - 1]] = 1;
        }
        double remaining = 0.0;
        for (int64_t t = 0; t < vocab; ++t) remaining += drawn[t] ? 0.0 : probs_draft[t];
        for (int64_t t = 0; t < vocab; ++t) law[t] = drawn[t] ? 0.0 : probs_draft[t] / remaining;
        if (mutant(Mutant::kSworUnnormalisedResidual)) {
          subtracted.resize(vocab);
          for (int64_t t = 0; t < vocab; ++t) subtracted[t] = drawn[t] ? 0.0 : probs_draft[t];
        }
        break;
      }
      case TreeMethod::kTopk:
        law[c] = 1.0;
        break;
    }
    const std::vector<double>& minus = subtracted.empty() ? law : subtracted;
    const double mass = laws.mass.back();
    std::vector<double> next(vocab);
    double next_mass = 0.0;
    if (method != TreeMethod::kKseq) {  // K-SEQ keeps p for every candidate
      const std::vector<double>& current = laws.residual.back();
      for (int64_t t = 0; t < vocab; ++t) {
        next[t] = std::max(0.0, current[t] - mass * minus[t]);
        next_mass += next[t];
      }
    }
    if (!(next_mass > 0.0)) {
      // K-SEQ, or p⁽ʲ⁾ ≤ q⁽ʲ⁾ up to rounding: keep p⁽ʲ⁾ (only the lossy variant reaches this)
      next = laws.residual.back();
      next_mass = mass;
      laws.kept_residual = laws.kept_residual || method != TreeMethod::kKseq;
    }
    laws.draft.push_back(std::move(law));
    laws.residual.push_back(std::move(next));
    laws.mass.push_back(next_mass);
    drawn[c] = 1;  // after the update: q⁽ʲ⁾ is the law before c_j was drawn
  }
  return laws;
}

namespace {

// Draws one token for `weights` (≥ 0, any total) through fixed point; returns -1 for zero mass.
int32_t sample_double_weights(const std::vector<double>& weights, uint32_t bits) {
  const std::vector<float> as_float(weights.begin(), weights.end());
  if (fixed_point_total(as_float) == 0) return -1;
  return sample_categorical(as_float, bits);
}

// The state of one node of a traversal (docs/verifiers.md V7), set when the walk enters it.
struct TraversalState {
  double w = 1.0;           // its weight
  std::vector<double> p;    // P: its target row, then the residuals (normalised)
  std::vector<double> q;    // Q: the law of its next child
  std::vector<char> drawn;  // the children deleted so far (their tokens)
  int deletions = 0;
  double first_w = 1.0;          // w when its first child was deleted
  std::vector<double> residual;  // (w·P − Q)⁺ of its last deletion, unnormalised
  size_t next_child = 0;         // children[node][next_child] is the next one to enter
};

// Traversal verification of request r (docs/verifiers.md V7): post-order over the tree, each node
// tested once all its children are deleted; a pass accepts the path to it.
void verify_traversal_request(const TreeBatch& batch, const TreeParams& params, int64_t r,
                              TreeResult& out) {
  const auto children = children_of(batch, r);
  const auto depth = depths_of(batch, r);
  const int64_t n = node_count(batch, r);
  const int64_t width = batch.max_nodes + 1;
  const int64_t v = batch.vocab;
  // index of a node's uniform: its rank among the nodes of its depth, in node order.
  std::vector<uint32_t> rank(n + 1, 0);
  {
    std::vector<uint32_t> seen(n + 2, 0);
    for (int64_t i = 0; i <= n; ++i) rank[i] = seen[depth[i]]++;
  }
  std::vector<TraversalState> state(n + 1);
  const auto enter = [&](int32_t node, double w) {
    TraversalState& s = state[node];
    s.w = w;
    const auto p = target_row(batch, r, node);
    s.p.assign(p.begin(), p.end());
    if (!children[node].empty()) {
      const auto q = draft_row(batch, r, node);
      s.q.assign(q.begin(), q.end());  // the first child's law: the row as given
      s.drawn.assign(v, 0);
    }
  };
  // The weight of the next child c of `node`: min(1, w·P(c)/Q(c)), 0 where Q(c) = 0.
  const auto child_weight = [&](int32_t node, int32_t token) {
    const TraversalState& s = state[node];
    if (mutant(Mutant::kTraversalStaleSiblingWeight) && s.deletions > 0) {
      const double p = target_row(batch, r, node)[token], q = draft_row(batch, r, node)[token];
      return q > 0.0 ? std::min(1.0, s.first_w * p / q) : 0.0;
    }
    return s.q[token] > 0.0 ? std::min(1.0, s.w * s.p[token] / s.q[token]) : 0.0;
  };
  // From `node`, enter first children down to a node whose children are all deleted.
  const auto descend = [&](int32_t node) {
    while (state[node].next_child < children[node].size()) {
      const int32_t kid = children[node][state[node].next_child];
      enter(kid, child_weight(node, batch.tokens[r * width + kid]));
      node = kid;
    }
    return node;
  };
  // Deletes `kid`, a child of `node`: Z = Σ (w·P − Q)⁺, w ← Z/(Z + 1 − w) (1 on 0/0),
  // P ← norm((w·P − Q)⁺) (kept when Z = 0: then w = 0 or nothing is left to reject), Q ← q on the
  // undrawn tokens renormalised.
  const auto remove = [&](int32_t node, int32_t kid) {
    TraversalState& s = state[node];
    std::vector<double> residual(v);
    double z = 0.0;
    for (int64_t t = 0; t < v; ++t) {
      residual[t] = std::max(0.0, s.w * s.p[t] - s.q[t]);
      z += residual[t];
    }
    if (s.deletions == 0) s.first_w = s.w;
    ++s.deletions;
    const double denominator = z + (1.0 - s.w);
    s.w = denominator > 0.0 ? std::min(1.0, z / denominator) : 1.0;
    if (z > 0.0) {
      for (int64_t t = 0; t < v; ++t) s.p[t] = residual[t] / z;
    }
    s.residual = std::move(residual);
    s.drawn[batch.tokens[r * width + kid]] = 1;
    const auto q = draft_row(batch, r, node);
    double remaining = 0.0;
    for (int64_t t = 0; t < v; ++t) remaining += s.drawn[t] ? 0.0 : q[t];
    for (int64_t t = 0; t < v; ++t) {
      s.q[t] = s.drawn[t] || !(remaining > 0.0) ? 0.0 : q[t] / remaining;
    }
    ++s.next_child;
    state[kid] = TraversalState{};  // its subtree is done: only the current path keeps V-rows
  };

  RandomAddress address{params.seed, request_id(batch, r), params.step, 0, Purpose::kBlockEta, 0};
  enter(0, 1.0);
  int32_t node = descend(0);
  while (node != 0) {  // the root always passes: its weight stays 1 (proofs/v7_traversal.md)
    address.position = static_cast<uint32_t>(depth[node]);
    address.index = rank[node];
    if (philox_uniform(address) <= state[node].w) break;
    const int32_t parent = batch.parents[row_index(batch, r, node)];
    remove(parent, node);
    node = descend(parent);
  }

  // The accepted path: node's ancestors from the root's child down to node.
  const int32_t n_accepted = depth[node];
  for (int32_t at = node, d = n_accepted; at != 0; at = batch.parents[row_index(batch, r, at)]) {
    --d;
    out.accepted_nodes[r * width + d] = at;
    out.emitted_tokens[r * width + d] = batch.tokens[r * width + at];
  }
  out.n_accepted[r] = n_accepted;

  const TraversalState& s = state[node];
  const auto p = target_row(batch, r, node);
  address.position = static_cast<uint32_t>(n_accepted + 1);
  address.index = 0;
  int32_t last = -1;
  if (s.deletions == 0) {  // an original leaf: the bonus from its p
    address.purpose = Purpose::kBonusSample;
    if (mutant(Mutant::kBonusWithoutStep)) address.step = 0;
    last = sample_categorical(p, philox_bits(address));
  } else {
    address.purpose = Purpose::kResidualSample;
    if (s.deletions == 1) {
      // The node's first residual norm((w·p − q)⁺) on its own rows, weighted as V5's: on a chain
      // the token is V5's bit for bit.
      const std::vector<uint64_t> weights =
          block_residual_weights(static_cast<float>(s.first_w), p, draft_row(batch, r, node));
      uint64_t mass = 0;
      for (uint64_t w : weights) mass += w;
      if (mass > 0) {
        const uint64_t target = fixed_target(philox_bits(address), mass);
        uint64_t cumulative = 0;
        for (int64_t t = 0; t < v && last < 0; ++t) {
          cumulative += weights[t];
          if (cumulative > target) last = static_cast<int32_t>(t);
        }
      }
    } else {
      last = sample_double_weights(s.residual, philox_bits(address));
    }
    if (last < 0) {  // zero mass after rounding: p, counted (docs/verifiers.md V1)
      out.residual_fallback[r] = 1;
      last = sample_categorical(mutant(Mutant::kFallbackFromDraft) ? draft_row(batch, r, node) : p,
                                philox_bits(address));
    }
  }
  out.emitted_tokens[r * width + n_accepted] = last;
}

void verify_request(const TreeBatch& batch, const TreeParams& params, int64_t r, TreeResult& out) {
  const TreeMethod method = method_of(batch, params, r);
  if (method == TreeMethod::kTraversal) {
    verify_traversal_request(batch, params, r, out);
    return;
  }
  const auto children = children_of(batch, r);
  const auto depth = depths_of(batch, r);
  const int64_t width = batch.max_nodes + 1;
  RandomAddress address{params.seed, request_id(batch, r), params.step, 0, Purpose::kAcceptTest, 0};
  int32_t node = 0;
  int32_t n_accepted = 0;
  while (true) {
    const auto p = target_row(batch, r, node);
    const auto& kids = children[node];
    address.position = static_cast<uint32_t>(depth[node] + 1);
    address.index = 0;
    if (kids.empty()) {  // a leaf: the bonus token from the leaf's p
      address.purpose = Purpose::kBonusSample;
      if (mutant(Mutant::kBonusWithoutStep)) address.step = 0;
      out.emitted_tokens[r * width + n_accepted] = sample_categorical(p, philox_bits(address));
      break;
    }
    const int64_t k = static_cast<int64_t>(kids.size());
    std::span<const float> q;
    if (needs_draft_probs(method)) q = draft_row(batch, r, node);
    std::vector<int32_t> candidates(k);
    for (int64_t j = 0; j < k; ++j) candidates[j] = batch.tokens[r * width + kids[j]];
    const TreeNodeLaws laws = tree_node_laws(method, p, q, candidates);
    const double rho = method == TreeMethod::kKseq ? kseq_rho(p, q, k) : 1.0;
    int32_t accepted = -1;
    address.purpose = Purpose::kAcceptTest;
    for (int64_t j = 0; j < k; ++j) {
      const int32_t c = candidates[j];
      address.index = static_cast<uint32_t>(j);
      const double u = philox_uniform(address);
      const double q_c = laws.draft[j][c];
      const bool accept =
          method == TreeMethod::kKseq
              ? q_c > 0.0 && u * rho * q_c <= static_cast<double>(p[c])
              : q_c > 0.0 && u * q_c * laws.mass[j] <= laws.residual[j][c];  // u ≤ p⁽ʲ⁾/q⁽ʲ⁾
      if (accept) {
        accepted = kids[j];
        break;
      }
    }
    if (accepted >= 0) {
      out.accepted_nodes[r * width + n_accepted] = accepted;
      out.emitted_tokens[r * width + n_accepted] = batch.tokens[r * width + accepted];
      ++n_accepted;
      node = accepted;
      continue;
    }
    // All k rejected: one token from p⁽ᵏ⁺¹⁾, or K-SEQ's p_res ∝ p − min(q, p/ρ)·(1−(1−β)^k)/β.
    const std::vector<double> residual =
        method == TreeMethod::kKseq ? kseq_residual(p, q, k, rho) : laws.residual[k];
    address.index = 0;
    address.purpose = Purpose::kResidualSample;
    const uint32_t bits = philox_bits(address);
    int32_t last = sample_double_weights(residual, bits);
    // Zero mass: K-SEQ's p_res after rounding, or a p⁽ʲ⁾ the node laws kept. Either way the token
    // comes from the target's row (p, or the kept p⁽ʲ⁾), and the event is counted.
    const bool fallback = last < 0 || laws.kept_residual;
    if (fallback) out.residual_fallback[r] = 1;
    if (fallback && mutant(Mutant::kFallbackFromDraft)) {  // Mutant: the fallback drawn from q.
      last = sample_categorical(draft_row(batch, r, node), bits);
    } else if (last < 0) {
      last = sample_categorical(p, bits);
    }
    out.emitted_tokens[r * width + n_accepted] = last;
    break;
  }
  out.n_accepted[r] = n_accepted;
}

}  // namespace

TreeResult verify_tree(const TreeBatch& batch, const TreeParams& params) {
  validate_tree_batch(batch, params);
  TreeResult result;
  result.batch = batch.batch;
  result.max_nodes = batch.max_nodes;
  const int64_t width = batch.max_nodes + 1;
  result.emitted_tokens.assign(batch.batch * width, -1);
  result.accepted_nodes.assign(batch.batch * width, -1);
  result.n_accepted.assign(batch.batch, 0);
  result.residual_fallback.assign(batch.batch, 0);
  for (int64_t r = 0; r < batch.batch; ++r) {
    result.lossy = result.lossy || is_lossy(method_of(batch, params, r));
    verify_request(batch, params, r, result);
  }
  for (uint8_t f : result.residual_fallback) result.residual_fallbacks += f;
  return result;
}

}  // namespace speclab
