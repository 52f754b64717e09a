// Traversal verification (docs/verifiers.md V7) on branching trees against the walk of its
// documentation carried out in rationals: every weight, residual and renormalised draft law of the
// walk exact, and each node's test u ≤ w taken with the uniform verify_tree reads at its address.
// On a chain V7 is V5 (VerifyTreeProperty.TraversalOnAChainIsBlockVerification); what only a
// branching tree shows is the state a later sibling is entered with, after its elder siblings were
// deleted and their parent's w, P and Q updated.
#include <gtest/gtest.h>
#include <rapidcheck.h>
#include <rapidcheck/gtest.h>

#include <algorithm>
#include <cmath>
#include <optional>
#include <vector>

#include "core/base/philox.hpp"
#include "core/exact/exact.hpp"
#include "core/verify/verify_tree.hpp"
#include "tests/support/chain_fixture.hpp"
#include "tests/support/tree_fixture.hpp"

namespace speclab {
namespace {

using exact::Q;
using testing::OwnedTreeBatch;

// A decision u ≤ w closer than this to its boundary is left to rounding: verify_tree's w is a
// double, the walk below is exact.
constexpr double kTie = 1e-9;

// Integer weights 0..4 with at least `support` positive entries.
std::vector<int> gen_weights(int64_t vocab, int64_t support) {
  auto w = *rc::gen::container<std::vector<int>>(vocab, rc::gen::inRange(0, 5));
  for (int64_t t = 0; std::count_if(w.begin(), w.end(), [](int x) { return x > 0; }) < support;
       ++t) {
    if (w[t] == 0) w[t] = 1;
  }
  return w;
}

// The node V7 accepts on request 0 of `batch` under `params`, walked in rationals from the text
// of docs/verifiers.md V7: a child c entered from its parent gets w_c = min(1, w·P(c)/Q(c)); the
// walk goes in post-order, first child first; a node whose children are all deleted passes with
// u ≤ w (u at position = depth, kBlockEta, index = rank among its depth's nodes), and the root
// always passes; a failure deletes the node and updates its parent with Z = Σ (w·P − Q)⁺:
// w ← Z/(Z + 1 − w) (1 on 0/0), P ← (w·P − Q)⁺/Z (kept when Z = 0), Q ← q on the tokens not
// drawn yet, renormalised. nullopt when a test came within kTie of its boundary.
std::optional<int32_t> rational_walk(const OwnedTreeBatch& batch, const TreeParams& params) {
  const int64_t n = batch.n_nodes[0], v = batch.vocab;
  const auto row = [&](const std::vector<float>& rows, int64_t node) {
    std::vector<Q> out;
    for (int64_t t = 0; t < v; ++t) out.emplace_back(static_cast<double>(rows[node * v + t]));
    return out;
  };
  std::vector<std::vector<int32_t>> children(n + 1);
  std::vector<int32_t> depth(n + 1, 0);
  std::vector<uint32_t> rank(n + 1, 0), at_depth(n + 2, 0);
  for (int64_t i = 1; i <= n; ++i) {
    children[batch.parents[i]].push_back(static_cast<int32_t>(i));
    depth[i] = depth[batch.parents[i]] + 1;
    rank[i] = at_depth[depth[i]]++;
  }
  struct State {
    Q w;
    std::vector<Q> p, q;
    std::vector<char> drawn;
    size_t next = 0;
  };
  std::vector<State> state(n + 1);
  const auto enter = [&](int32_t node, const Q& w) {
    state[node] = {w, row(batch.probs_target, node), row(batch.probs_draft, node),
                   std::vector<char>(v, 0), 0};
  };
  const auto descend = [&](int32_t node) {
    while (state[node].next < children[node].size()) {
      const int32_t kid = children[node][state[node].next];
      const State& s = state[node];
      const int32_t c = batch.tokens[kid];
      enter(kid, s.q[c] > 0 ? std::min(Q(1), Q(s.w * s.p[c] / s.q[c])) : Q(0));
      node = kid;
    }
    return node;
  };
  const auto remove = [&](int32_t node, int32_t kid) {
    State& s = state[node];
    std::vector<Q> residual(v);
    Q z = 0;
    for (int64_t t = 0; t < v; ++t) z += residual[t] = std::max(Q(0), Q(s.w * s.p[t] - s.q[t]));
    const Q denominator = z + 1 - s.w;
    s.w = denominator > 0 ? std::min(Q(1), Q(z / denominator)) : Q(1);
    if (z > 0) {
      for (int64_t t = 0; t < v; ++t) s.p[t] = residual[t] / z;
    }
    s.drawn[batch.tokens[kid]] = 1;
    const std::vector<Q> q = row(batch.probs_draft, node);
    Q remaining = 0;
    for (int64_t t = 0; t < v; ++t) remaining += s.drawn[t] ? Q(0) : q[t];
    for (int64_t t = 0; t < v; ++t) s.q[t] = s.drawn[t] || remaining == 0 ? Q(0) : q[t] / remaining;
    ++s.next;
  };
  enter(0, Q(1));
  int32_t node = descend(0);
  while (node != 0) {
    const RandomAddress address{params.seed,        batch.request_ids[0],
                                params.step,        static_cast<uint32_t>(depth[node]),
                                Purpose::kBlockEta, rank[node]};
    const double u = philox_uniform(address);
    if (std::abs(u - state[node].w.convert_to<double>()) < kTie) return std::nullopt;
    if (Q(u) <= state[node].w) break;
    const int32_t parent = batch.parents[node];
    remove(parent, node);
    node = descend(parent);
  }
  return node;
}

RC_GTEST_PROP(VerifyTreeProperty, TraversalWalkMatchesRationalWeights, ()) {
  // One complete K-ary tree (K 2..3, depth 1..3) drafted without replacement, rows from a pool
  // picked by (parent token, depth), verified at 16 seeds: the accepted path must be the rational
  // walk's at each.
  const int64_t v = *rc::gen::inRange<int64_t>(3, 6);
  const int64_t k = *rc::gen::inRange<int64_t>(2, 4);
  const int64_t depth = *rc::gen::inRange<int64_t>(1, 4);
  const int64_t pool = 2 * v + 1;
  std::vector<std::vector<float>> targets, drafts;
  for (int64_t i = 0; i < pool; ++i) {
    targets.emplace_back(v);
    drafts.emplace_back(v);
    testing::fill_row(targets.back().data(), gen_weights(v, 1));
    testing::fill_row(drafts.back().data(), gen_weights(v, k));
  }
  const int64_t n = testing::kary_nodes(k, depth);
  OwnedTreeBatch batch(1, n, v);
  batch.n_nodes = {static_cast<int32_t>(n)};
  batch.request_ids = {*rc::gen::arbitrary<uint32_t>()};
  testing::fill_kary_tree(
      batch, 0, TreeMethod::kTraversal, k, depth, targets, drafts,
      [&](int32_t token, int64_t d) { return (token + 1 + d * v) % pool; },
      *rc::gen::arbitrary<uint64_t>(), batch.request_ids[0], 0);
  TreeParams params{.method = TreeMethod::kTraversal,
                    .seed = *rc::gen::arbitrary<uint64_t>(),
                    .step = *rc::gen::arbitrary<uint32_t>()};
  for (int s = 0; s < 16; ++s, ++params.seed) {
    const std::optional<int32_t> expected = rational_walk(batch, params);
    if (!expected) continue;
    const TreeResult result = verify_tree(batch.view(), params);
    std::vector<int32_t> path;  // the accepted nodes, root's child first
    for (int32_t at = *expected; at != 0; at = batch.parents[at]) path.insert(path.begin(), at);
    RC_ASSERT(result.n_accepted[0] == static_cast<int32_t>(path.size()));
    RC_ASSERT(std::equal(path.begin(), path.end(), result.accepted_nodes.begin()));
  }
}

}  // namespace
}  // namespace speclab
