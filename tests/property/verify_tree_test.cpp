// RapidCheck properties of the tree verifier (docs/verifiers.md V6; docs/testing.md "Properties
// that must hold"): structure of the output, padding and batching invariance, seeds, and a
// one-branch tree that is V1 token for token.
#include "core/verify/verify_tree.hpp"

#include <gtest/gtest.h>
#include <rapidcheck.h>
#include <rapidcheck/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>

#include "core/exact/exact.hpp"
#include "core/verify/verify_block.hpp"
#include "core/verify/verify_chain.hpp"
#include "tests/support/chain_fixture.hpp"
#include "tests/support/chain_gen.hpp"
#include "tests/support/tree_fixture.hpp"
#include "tests/support/zero_mass_rows.hpp"

namespace speclab {
namespace {

using testing::fill_kary_tree;
using testing::fill_row;
using testing::kary_nodes;
using testing::OwnedTreeBatch;

// Integer weights 0..4 with at least `support` positive entries.
std::vector<int> gen_weights(int64_t vocab, int64_t support = 1) {
  auto w = *rc::gen::container<std::vector<int>>(vocab, rc::gen::inRange(0, 5));
  for (int64_t t = 0; std::count_if(w.begin(), w.end(), [](int x) { return x > 0; }) < support;
       ++t) {
    if (w[t] == 0) w[t] = 1;
  }
  return w;
}

std::vector<float> as_row(const std::vector<int>& w) {
  std::vector<float> row(w.size());
  fill_row(row.data(), w);
  return row;
}

struct Instance {
  OwnedTreeBatch batch;
  TreeParams params;
  std::vector<int64_t> depth;  // [B] tree depth γ_b (the K-ary tree's, 0 when empty)
};

TreeMethod gen_method() {
  return *rc::gen::element(TreeMethod::kIid, TreeMethod::kSwor, TreeMethod::kTopk,
                           TreeMethod::kTopkSoftmaxQ, TreeMethod::kKseq, TreeMethod::kTraversal);
}

// B 1..3 K-ary trees (K 1..3 ≤ V, depth 0..2) padded to a common N, rows from a pool picked by
// (parent token, depth) so they depend on the context; a per-request method half of the time.
Instance gen_instance(bool lossless_only = false) {
  const int64_t b = *rc::gen::inRange<int64_t>(1, 4);
  const int64_t v = *rc::gen::inRange<int64_t>(2, 6);
  const int64_t k = *rc::gen::inRange<int64_t>(1, std::min<int64_t>(v, 3) + 1);
  const int64_t max_depth = *rc::gen::inRange<int64_t>(0, 3);
  const int64_t pool = 2 * v + 1;
  std::vector<std::vector<float>> targets, drafts;
  for (int64_t i = 0; i < pool; ++i) {
    targets.push_back(as_row(gen_weights(v)));
    drafts.push_back(as_row(gen_weights(v, k)));
  }
  Instance inst{OwnedTreeBatch(b, kary_nodes(k, max_depth), v), {}, {}};
  inst.params.seed = *rc::gen::arbitrary<uint64_t>();
  inst.params.step = *rc::gen::arbitrary<uint32_t>();
  inst.params.method =
      lossless_only ? *rc::gen::element(TreeMethod::kIid, TreeMethod::kSwor, TreeMethod::kTopk,
                                        TreeMethod::kKseq, TreeMethod::kTraversal)
                    : gen_method();
  const bool own_methods = !lossless_only && *rc::gen::arbitrary<bool>();
  inst.batch.n_nodes.resize(b);
  for (int64_t r = 0; r < b; ++r) {
    const TreeMethod method = own_methods ? gen_method() : inst.params.method;
    if (own_methods) inst.batch.methods.push_back(method);
    const int64_t depth = *rc::gen::inRange<int64_t>(0, max_depth + 1);
    inst.depth.push_back(depth);
    inst.batch.n_nodes[r] = static_cast<int32_t>(kary_nodes(k, depth));
    fill_kary_tree(
        inst.batch, r, method, k, depth, targets, drafts,
        [&](int32_t token, int64_t d) { return (token + 1 + d * v) % pool; }, inst.params.seed,
        static_cast<uint32_t>(r), 0);
  }
  if (*rc::gen::arbitrary<bool>()) {
    inst.batch.request_ids =
        *rc::gen::container<std::vector<uint32_t>>(b, rc::gen::arbitrary<uint32_t>());
  }
  return inst;
}

RC_GTEST_PROP(VerifyTreeProperty, OutputIsAcceptedPathPlusOneToken, ()) {
  const auto inst = gen_instance();
  auto b = inst.batch;
  const auto res = verify_tree(b.view(), inst.params);
  const int64_t width = b.max_nodes + 1;
  for (int64_t r = 0; r < b.batch; ++r) {
    const int64_t n = res.n_accepted[r];
    RC_ASSERT(n >= 0);
    RC_ASSERT(n <= inst.depth[r]);
    int32_t previous = 0;
    for (int64_t i = 0; i < width; ++i) {
      const int32_t node = res.accepted_nodes[r * width + i];
      const int32_t token = res.emitted_tokens[r * width + i];
      if (i < n) {
        RC_ASSERT(node >= 1 && node <= b.n_nodes[r]);
        RC_ASSERT(b.parent(r, node) == previous);
        RC_ASSERT(token == b.token(r, node));
        previous = node;
      } else {
        RC_ASSERT(node == -1);
        if (i == n) RC_ASSERT(token >= 0 && token < b.vocab);
        if (i > n) RC_ASSERT(token == -1);
      }
    }
  }
  bool any_lossy = false;
  for (int64_t r = 0; r < b.batch; ++r) {
    any_lossy = any_lossy || is_lossy(b.methods.empty() ? inst.params.method : b.methods[r]);
  }
  RC_ASSERT(res.lossy == any_lossy);
}

RC_GTEST_PROP(VerifyTreeProperty, ZeroProbabilityTokenIsNeverEmitted, ()) {
  const auto inst = gen_instance(/*lossless_only=*/true);
  auto b = inst.batch;
  const auto res = verify_tree(b.view(), inst.params);
  const int64_t width = b.max_nodes + 1;
  for (int64_t r = 0; r < b.batch; ++r) {
    int32_t node = 0;
    for (int64_t i = 0; i <= res.n_accepted[r]; ++i) {
      RC_ASSERT(b.target_row(r, node)[res.emitted_tokens[r * width + i]] > 0.0f);
      if (i < res.n_accepted[r]) node = res.accepted_nodes[r * width + i];
    }
  }
}

RC_GTEST_PROP(VerifyTreeProperty, DraftEqualToTargetAcceptsFirstChild, ()) {
  // p = q at every node: the first candidate (drawn from q, so q(c) > 0) passes u·q(c) ≤ p(c)
  // under i.i.d. (whatever law built the tree; duplicates are allowed) and K-SEQ has ρ = 1; the
  // walk reaches a leaf.
  auto inst = gen_instance();
  auto& b = inst.batch;
  b.methods.clear();
  inst.params.method = *rc::gen::element(TreeMethod::kIid, TreeMethod::kKseq);
  for (int64_t r = 0; r < b.batch; ++r) {
    for (int64_t i = 0; i <= b.max_nodes; ++i) {
      std::copy_n(b.draft_row(r, i), b.vocab, b.target_row(r, i));
    }
  }
  const auto res = verify_tree(b.view(), inst.params);
  for (int64_t r = 0; r < b.batch; ++r) RC_ASSERT(res.n_accepted[r] == inst.depth[r]);
}

RC_GTEST_PROP(VerifyTreeProperty, PaddedBatchEqualsEachRequestAlone, ()) {
  const auto inst = gen_instance();
  const auto& b = inst.batch;
  const auto together = verify_tree(b.view(), inst.params);
  const int64_t width = b.max_nodes + 1;
  for (int64_t r = 0; r < b.batch; ++r) {
    const int64_t n = b.n_nodes[r];
    OwnedTreeBatch alone(1, n, b.vocab);
    std::copy_n(&b.probs_target[r * width * b.vocab], (n + 1) * b.vocab,
                alone.probs_target.begin());
    std::copy_n(&b.probs_draft[r * width * b.vocab], (n + 1) * b.vocab, alone.probs_draft.begin());
    std::copy_n(&b.parents[r * width], n + 1, alone.parents.begin());
    std::copy_n(&b.tokens[r * width], n + 1, alone.tokens.begin());
    alone.request_ids = {b.request_ids.empty() ? static_cast<uint32_t>(r) : b.request_ids[r]};
    TreeParams params = inst.params;
    if (!b.methods.empty()) params.method = b.methods[r];
    const auto single = verify_tree(alone.view(), params);
    RC_ASSERT(single.n_accepted[0] == together.n_accepted[r]);
    for (int64_t i = 0; i <= single.n_accepted[0]; ++i) {
      RC_ASSERT(single.emitted_tokens[i] == together.emitted_tokens[r * width + i]);
      RC_ASSERT(single.accepted_nodes[i] == together.accepted_nodes[r * width + i]);
    }
  }
}

// The output is a function of the batch, seed and step alone: the same again after a call at
// another seed and step, from a copy of the batch in other memory.
// A chain-shaped tree whose every draft row is its target row and whose tokens have weight there
// accepts every node (iid, swor and K-SEQ: u·q ≤ p; V7: weights 1), so it ends at the leaf: the
// bonus token is the categorical draw from the leaf's p with the uniform at (seed; request,
// step, depth + 1, kBonusSample) — docs/randomness.md. (The top-k trees accept by p alone and so
// not with certainty.)
RC_GTEST_PROP(VerifyTreeProperty, BonusTokenIsTheDrawAtItsAddress, ()) {
  const TreeMethod method = *rc::gen::element(TreeMethod::kIid, TreeMethod::kSwor,
                                              TreeMethod::kKseq, TreeMethod::kTraversal);
  const auto v = *rc::gen::inRange<int64_t>(2, 9);
  const auto depth = *rc::gen::inRange<int64_t>(1, 5);
  testing::OwnedTreeBatch b(1, depth, v);
  for (int64_t node = 0; node <= depth; ++node) {
    auto weights = *rc::gen::container<std::vector<int>>(v, rc::gen::inRange(0, 5));
    weights[*rc::gen::inRange<int64_t>(0, v)] += 1;  // a positive total
    const double total = std::accumulate(weights.begin(), weights.end(), 0.0);
    for (int64_t t = 0; t < v; ++t) {
      b.target_row(0, node)[t] = b.draft_row(0, node)[t] = static_cast<float>(weights[t] / total);
    }
    if (node > 0) {
      b.parent(0, node) = static_cast<int32_t>(node - 1);
      const float* parent_row = b.target_row(0, node - 1);
      std::vector<int32_t> possible;
      for (int32_t t = 0; t < v; ++t) {
        if (parent_row[t] > 0.0f) possible.push_back(t);
      }
      b.token(0, node) = *rc::gen::elementOf(possible);
    }
  }
  const auto seed = *rc::gen::arbitrary<uint64_t>();
  const auto step = *rc::gen::arbitrary<uint32_t>();
  const auto res = verify_tree(b.view(), {.method = method, .seed = seed, .step = step});
  RC_ASSERT(res.n_accepted[0] == depth);
  const RandomAddress address{
      seed, 0, step, static_cast<uint32_t>(depth + 1), Purpose::kBonusSample, 0};
  const std::span<const float> leaf(b.target_row(0, depth), static_cast<size_t>(v));
  RC_ASSERT(res.emitted_tokens[depth] == sample_categorical(leaf, philox_bits(address)));
}

// Each tree verifier's zero-mass fallback reached (tests/support/zero_mass_rows.hpp): a root with
// one child, the token the accept test (V7: the weight min(1, p/q)) always rejects, and no
// residual mass after it: p's draw at the residual uniform, counted.
TEST(VerifyTreeFallback, ZeroMassResidualDrawsFromTheTarget) {
  const testing::ZeroMassRows rows;
  testing::OwnedTreeBatch b(1, 1, 4);
  std::copy(rows.p.begin(), rows.p.end(), b.target_row(0, 0));
  std::copy(rows.p.begin(), rows.p.end(), b.target_row(0, 1));
  std::copy(rows.q.begin(), rows.q.end(), b.draft_row(0, 0));
  std::copy(rows.q.begin(), rows.q.end(), b.draft_row(0, 1));
  b.parent(0, 1) = 0;
  b.token(0, 1) = testing::ZeroMassRows::kDraft;
  for (const TreeMethod method :
       {TreeMethod::kIid, TreeMethod::kSwor, TreeMethod::kKseq, TreeMethod::kTraversal}) {
    const auto res =
        verify_tree(b.view(), {.method = method, .seed = rows.seed, .step = rows.step});
    EXPECT_TRUE(rows.fell_back_to_target(res)) << to_string(method);
  }
}

RC_GTEST_PROP(VerifyTreeProperty, SameSeedGivesSameOutput, ()) {
  const auto inst = gen_instance();
  const auto a = verify_tree(inst.batch.view(), inst.params);
  auto other = inst.params;
  other.seed += 1;
  other.step += 7;
  verify_tree(inst.batch.view(), other);
  const auto copy = inst.batch;
  const auto c = verify_tree(copy.view(), inst.params);
  RC_ASSERT(a.emitted_tokens == c.emitted_tokens);
  RC_ASSERT(a.accepted_nodes == c.accepted_nodes);
}

RC_GTEST_PROP(VerifyTreeProperty, OneBranchIidChainIsTokenLevel, ()) {
  // A tree with one child per node is a chain; i.i.d. with K = 1 is V1 with the same uniform
  // addresses (position = depth, kAcceptTest, index 0), so the tokens agree with verify_chain.
  // Integer-weight rows keep p − q exact in double, so both residuals round alike.
  const int64_t b = *rc::gen::inRange<int64_t>(1, 4);
  const int64_t g = *rc::gen::inRange<int64_t>(0, 5);
  const int64_t v = *rc::gen::inRange<int64_t>(2, 7);
  testing::OwnedChainBatch chain(b, g, v);
  OwnedTreeBatch tree(b, g, v);
  const uint64_t seed = *rc::gen::arbitrary<uint64_t>();
  for (int64_t r = 0; r < b; ++r) {
    for (int64_t i = 0; i <= g; ++i) {
      fill_row(chain.target_row(r, i), gen_weights(v));
      std::copy_n(chain.target_row(r, i), v, tree.target_row(r, i));
    }
    for (int64_t i = 0; i < g; ++i) {
      fill_row(chain.draft_row(r, i), gen_weights(v));
      std::copy_n(chain.draft_row(r, i), v, tree.draft_row(r, i));
    }
  }
  chain.draw_drafts(seed);
  for (int64_t r = 0; r < b; ++r) {
    for (int64_t i = 1; i <= g; ++i) {
      tree.parent(r, i) = static_cast<int32_t>(i - 1);
      tree.token(r, i) = chain.token(r, i - 1);
    }
  }
  const auto c =
      verify_chain_reference(chain.view(), {.method = ChainMethod::kToken, .seed = seed});
  const auto t = verify_tree(tree.view(), {.method = TreeMethod::kIid, .seed = seed});
  RC_ASSERT(c.n_accepted == t.n_accepted);
  RC_ASSERT(c.emitted_tokens == t.emitted_tokens);
}

RC_GTEST_PROP(VerifyTreeProperty, TraversalOnAChainIsBlockVerification, ()) {
  // docs/verifiers.md V7: with one child per node traversal tests the leaf with w_γ, then each
  // node, deepest first, with V5's h_i = Z_i/(Z_i + 1 − w_i), at V5's addresses (position = depth,
  // kBlockEta, index 0), and samples V5's residual; so the tokens equal verify_block's on the same
  // seed, for every row (not only exact ones), ragged depths and request ids included.
  const int64_t b = *rc::gen::inRange<int64_t>(1, 4);
  const int64_t g = *rc::gen::inRange<int64_t>(0, 5);
  const int64_t v = *rc::gen::inRange<int64_t>(2, 7);
  testing::OwnedChainBatch chain(b, g, v);
  OwnedTreeBatch tree(b, g, v);
  const uint64_t seed = *rc::gen::arbitrary<uint64_t>();
  const uint32_t step = *rc::gen::arbitrary<uint32_t>();
  for (int64_t r = 0; r < b; ++r) {
    for (int64_t i = 0; i <= g; ++i) {
      fill_row(chain.target_row(r, i), gen_weights(v));
      std::copy_n(chain.target_row(r, i), v, tree.target_row(r, i));
    }
    for (int64_t i = 0; i < g; ++i) {
      fill_row(chain.draft_row(r, i), gen_weights(v));
      std::copy_n(chain.draft_row(r, i), v, tree.draft_row(r, i));
    }
  }
  chain.draw_drafts(seed);
  chain.n_draft = *rc::gen::container<std::vector<int32_t>>(
      b, rc::gen::inRange<int32_t>(0, static_cast<int32_t>(g) + 1));
  tree.n_nodes = chain.n_draft;
  chain.request_ids = *rc::gen::container<std::vector<uint32_t>>(b, rc::gen::arbitrary<uint32_t>());
  tree.request_ids = chain.request_ids;
  for (int64_t r = 0; r < b; ++r) {
    for (int64_t i = 1; i <= g; ++i) {
      tree.parent(r, i) = static_cast<int32_t>(i - 1);
      tree.token(r, i) = chain.token(r, i - 1);
    }
  }
  const auto c = verify_block(chain.view(), {.seed = seed, .step = step});
  const auto t =
      verify_tree(tree.view(), {.method = TreeMethod::kTraversal, .seed = seed, .step = step});
  RC_ASSERT(c.n_accepted == t.n_accepted);
  RC_ASSERT(c.emitted_tokens == t.emitted_tokens);
  RC_ASSERT(c.residual_fallback == t.residual_fallback);
}

// kseq_residual, what K-SEQ draws from after k rejections, against its formula in rationals on
// the very float rows and ρ given (every float and double is a rational): β = Σ min(q, p/ρ),
// p_res = max(0, p − min(q, p/ρ)·(1 − (1 − β)^k)/β). The verifier computes it in double, so
// entries agree to 1e-12.
RC_GTEST_PROP(VerifyTreeProperty, KseqResidualMatchesRationalFormula, ()) {
  using exact::Q;
  const int64_t v = *rc::gen::inRange<int64_t>(2, 7);
  const int64_t k = *rc::gen::inRange<int64_t>(1, 5);
  const std::vector<float> p = as_row(testing::gen_dyadic_weights(v));
  const std::vector<float> q = as_row(testing::gen_dyadic_weights(v));
  const double rho = kseq_rho(p, q, k);
  const std::vector<double> residual = kseq_residual(p, q, k, rho);
  const Q rho_q(rho);
  Q beta = 0;
  for (int64_t t = 0; t < v; ++t) beta += std::min(Q(q[t]), Q(Q(p[t]) / rho_q));
  Q scale = 0;
  if (beta > 0) {
    Q miss = 1;
    for (int64_t j = 0; j < k; ++j) miss *= Q(1 - beta);
    scale = Q(Q(1 - miss) / beta);
  }
  for (int64_t t = 0; t < v; ++t) {
    const Q kept = Q(std::min(Q(q[t]), Q(Q(p[t]) / rho_q)) * scale);
    const Q expected = std::max(Q(0), Q(Q(p[t]) - kept));
    RC_ASSERT(std::abs(residual[t] - expected.convert_to<double>()) <= 1e-12);
  }
}

RC_GTEST_PROP(VerifyTreeProperty, NodeLawsMatchRationalRecursion, ()) {
  // docs/testing.md "A thin random layer over pure functions": tree_node_laws, the q⁽ʲ⁾ and p⁽ʲ⁾
  // that verify_tree's accept tests and residual read, against docs/verifiers.md V6 step 1 in
  // rationals on the very float rows given: p⁽¹⁾ = p, p⁽ʲ⁺¹⁾ = norm((p⁽ʲ⁾ − q⁽ʲ⁾)⁺), with q⁽ʲ⁾ = q
  // (i.i.d.; and the lossy softmax-q variant), q on the tokens not drawn yet renormalised (without
  // replacement), one-hot(c_j) (top-k); K-SEQ keeps p. The recursion runs in double, so every
  // entry agrees to 1e-12. Candidates follow their law's rules: distinct for top-k and without
  // replacement (which needs q > 0 on them), the top-k of q for the top-k methods.
  using exact::Q;
  // K ≥ 3 in about half the cases: the third sibling is where without replacement's q⁽ʲ⁾ must
  // exclude more than the last draw.
  const int64_t v = *rc::gen::inRange<int64_t>(2, 7);
  const int64_t k = std::min<int64_t>(v, *rc::gen::inRange<int64_t>(1, 5));
  // Rows with power-of-two totals: Σq is exactly 1 in float, so q⁽¹⁾ = q/Σq is q and p = q cancels
  // exactly, as in the rationals (with other float rows q/Σq is off by an ulp and p − q⁽¹⁾ leaves
  // a 1e-8 residue whose normalisation no tolerance survives).
  const std::vector<float> p = as_row(testing::gen_dyadic_weights(v));
  std::vector<int> q_weights = testing::gen_dyadic_weights(v);
  for (int tries = 0;
       std::count_if(q_weights.begin(), q_weights.end(), [](int w) { return w > 0; }) < k;
       ++tries) {
    if (tries == 100) RC_DISCARD("no draft row with support ≥ K");
    q_weights = testing::gen_dyadic_weights(v);
  }
  const std::vector<float> q = as_row(q_weights);
  std::vector<int32_t> top(v), support;
  std::iota(top.begin(), top.end(), 0);
  std::stable_sort(top.begin(), top.end(), [&](int32_t a, int32_t b) { return q[a] > q[b]; });
  top.resize(k);
  for (int32_t t = 0; t < v; ++t) {
    if (q[t] > 0.0f) support.push_back(t);
  }
  const auto distinct =
      *rc::gen::unique<std::vector<int32_t>>(static_cast<size_t>(k), rc::gen::elementOf(support));
  const auto any = *rc::gen::container<std::vector<int32_t>>(
      static_cast<size_t>(k), rc::gen::inRange<int32_t>(0, static_cast<int32_t>(v)));
  // Every method on the same rows, so each case checks the without-replacement recursion.
  for (const TreeMethod method : {TreeMethod::kIid, TreeMethod::kSwor, TreeMethod::kTopk,
                                  TreeMethod::kTopkSoftmaxQ, TreeMethod::kKseq}) {
    const std::vector<int32_t>& candidates =
        method == TreeMethod::kTopk || method == TreeMethod::kTopkSoftmaxQ
            ? top
            : (method == TreeMethod::kSwor ? distinct : any);
    const TreeNodeLaws laws = tree_node_laws(method, p, q, candidates);
    RC_ASSERT(laws.draft.size() == static_cast<size_t>(k));
    RC_ASSERT(laws.residual.size() == static_cast<size_t>(k + 1));
    RC_ASSERT(laws.mass.size() == static_cast<size_t>(k + 1));

    std::vector<Q> pj(v), qrow(v);
    for (int64_t t = 0; t < v; ++t) {
      pj[t] = Q(static_cast<double>(p[t]));
      qrow[t] = Q(static_cast<double>(q[t]));
    }
    // q⁽¹⁾..q⁽ᵏ⁾ first: they do not depend on p, so every one is compared.
    std::vector<std::vector<Q>> qs;
    std::vector<char> drawn(v, 0);
    for (int64_t j = 0; j < k; ++j) {
      std::vector<Q> qj(v, Q(0));
      switch (method) {
        case TreeMethod::kIid:
        case TreeMethod::kTopkSoftmaxQ:
        case TreeMethod::kKseq:
          qj = qrow;
          break;
        case TreeMethod::kSwor: {
          Q remaining = 0;
          for (int64_t t = 0; t < v; ++t) remaining += drawn[t] ? Q(0) : qrow[t];
          for (int64_t t = 0; t < v; ++t) qj[t] = drawn[t] ? Q(0) : Q(qrow[t] / remaining);
          break;
        }
        case TreeMethod::kTopk:
          qj[candidates[j]] = 1;
          break;
      }
      for (int64_t t = 0; t < v; ++t) {
        RC_ASSERT(std::abs(laws.draft[j][t] - qj[t].convert_to<double>()) < 1e-12);
      }
      qs.push_back(std::move(qj));
      drawn[candidates[j]] = 1;
    }
    for (int64_t j = 0; j <= k; ++j) {
      for (int64_t t = 0; t < v; ++t) {
        RC_ASSERT(std::abs(laws.residual[j][t] / laws.mass[j] - pj[t].convert_to<double>()) <
                  1e-12);
      }
      if (j == k) break;
      if (method == TreeMethod::kKseq) continue;  // p is not updated between candidates
      std::vector<Q> next(v);
      Q mass = 0;
      for (int64_t t = 0; t < v; ++t) {
        next[t] = std::max(Q(0), Q(pj[t] - qs[j][t]));
        mass += next[t];
      }
      // p⁽ʲ⁾ ≤ q⁽ʲ⁾ everywhere: c_j is accepted surely and p⁽ʲ⁺¹⁾ is never used (the verifier then
      // keeps p⁽ʲ⁾); nothing further to compare.
      if (mass == 0) break;
      for (int64_t t = 0; t < v; ++t) pj[t] = next[t] / mass;
    }
  }
}

TEST(VerifyTreeProperty, DifferentSeedGivesDifferentStream) {
  // 64 binary trees of depth 2 over V = 8 with p ≠ q.
  const int64_t b = 64, k = 2, depth = 2, v = 8;
  OwnedTreeBatch batch(b, kary_nodes(k, depth), v);
  const std::vector<std::vector<float>> targets{as_row({1, 2, 3, 4, 4, 3, 2, 1})};
  const std::vector<std::vector<float>> drafts{as_row({4, 3, 2, 1, 1, 2, 3, 4})};
  for (int64_t r = 0; r < b; ++r) {
    fill_kary_tree(
        batch, r, TreeMethod::kIid, k, depth, targets, drafts, [](int32_t, int64_t) { return 0; },
        11, static_cast<uint32_t>(r), 0);
  }
  EXPECT_NE(verify_tree(batch.view(), {.seed = 1}).emitted_tokens,
            verify_tree(batch.view(), {.seed = 2}).emitted_tokens);
}

}  // namespace
}  // namespace speclab
