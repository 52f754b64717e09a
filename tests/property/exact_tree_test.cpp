// Exact rational checks of tree verification (docs/verifiers.md V6, docs/testing.md "Exact checks
// first"): every lossless candidate law gives the target's first token and conditionals exactly,
// and a Markov stream equal to the target chain; the draft-softmax-as-q variant provably does not.
#include "core/exact/exact_tree.hpp"

#include <gtest/gtest.h>
#include <rapidcheck/gtest.h>

#include <cmath>
#include <numeric>
#include <string>
#include <vector>

#include "core/base/error.hpp"
#include "core/verify/verify_tree.hpp"

namespace speclab::exact {
namespace {

// Integer weights 0..4, not all zero, normalised exactly; `min_support` positive entries at least.
rc::Gen<Row> gen_row(int vocab, int min_support = 1) {
  return rc::gen::map(
      rc::gen::suchThat(rc::gen::container<std::vector<int>>(vocab, rc::gen::inRange(0, 5)),
                        [min_support](const std::vector<int>& weights) {
                          return std::count_if(weights.begin(), weights.end(),
                                               [](int w) { return w > 0; }) >= min_support;
                        }),
      [](const std::vector<int>& weights) {
        const int total = std::accumulate(weights.begin(), weights.end(), 0);
        Row row;
        for (int w : weights) row.push_back(Q(w) / total);
        return row;
      });
}

std::vector<Row> gen_rows(int count, int vocab, int min_support = 1) {
  std::vector<Row> rows;
  for (int i = 0; i < count; ++i) rows.push_back(*gen_row(vocab, min_support));
  return rows;
}

Q total_probability(const Distribution& distribution) {
  Q total = 0;
  for (const auto& [sequence, probability] : distribution) total += probability;
  return total;
}

const Row kSpecDraft{Q(2, 3), Q(1, 3)};
const Row kSpecTarget{Q(1, 3), Q(2, 3)};

TreeMethod gen_lossless_method() {
  return *rc::gen::element(TreeMethod::kIid, TreeMethod::kSwor, TreeMethod::kTopk,
                           TreeMethod::kKseq);
}

RC_GTEST_PROP(ExactTree, LosslessMethodsAreLosslessOneStep, ()) {
  const TreeMethod method = gen_lossless_method();
  const int vocab = *rc::gen::inRange(2, 5);
  const int gamma = *rc::gen::inRange(0, 3);
  const int branches = *rc::gen::inRange(1, std::min(vocab, 3) + 1);
  const std::vector<Row> probs_target = gen_rows(gamma + 1, vocab);
  const std::vector<Row> probs_draft =
      gen_rows(gamma, vocab, method == TreeMethod::kSwor ? branches : 1);
  const StepResult step = enumerate_tree_step(probs_target, probs_draft, method, branches);
  RC_ASSERT(total_probability(step.distribution) == 1);
  RC_ASSERT(step.first_token_marginal == probs_target[0]);
  const auto violation = find_conditional_violation(step, probs_target);
  RC_ASSERT_FALSE(violation.has_value());
}

RC_GTEST_PROP(ExactTree, LosslessStreamsMatchTargetChain, ()) {
  const TreeMethod method = gen_lossless_method();
  const int vocab = *rc::gen::inRange(2, 4);
  const int gamma = *rc::gen::inRange(1, 3);
  const int branches = *rc::gen::inRange(1, vocab + 1);
  const int start = *rc::gen::inRange(0, vocab);
  const MarkovChain target{vocab, gen_rows(vocab, vocab)};
  const MarkovChain draft{vocab,
                          gen_rows(vocab, vocab, method == TreeMethod::kSwor ? branches : 1)};
  const Distribution stream =
      enumerate_tree_stream(target, draft, start, gamma, branches, 3, method);
  RC_ASSERT(stream == chain_distribution(target, start, 3));
}

RC_GTEST_PROP(ExactTree, OneBranchIsTokenLevel, ()) {
  // K = 1: i.i.d., without replacement and K-SEQ (ρ = 1 solves β = ρβ) are all V1 with q; top-1 is
  // V1 with the deterministic draft q = one-hot(argmax q).
  const int vocab = *rc::gen::inRange(2, 5);
  const int gamma = *rc::gen::inRange(1, 4);
  const std::vector<Row> probs_target = gen_rows(gamma + 1, vocab);
  const std::vector<Row> probs_draft = gen_rows(gamma, vocab);
  const Distribution token =
      enumerate_step(probs_target, probs_draft, Method{ChainMethod::kToken}).distribution;
  for (TreeMethod method : {TreeMethod::kIid, TreeMethod::kSwor, TreeMethod::kKseq}) {
    RC_ASSERT(enumerate_tree_step(probs_target, probs_draft, method, 1).distribution == token);
  }
  std::vector<Row> one_hot;
  for (const Row& q : probs_draft) one_hot.push_back(one_hot_argmax(q));
  RC_ASSERT(enumerate_tree_step(probs_target, probs_draft, TreeMethod::kTopk, 1).distribution ==
            enumerate_step(probs_target, one_hot, Method{ChainMethod::kToken}).distribution);
}

RC_GTEST_PROP(ExactTree, MoreCandidatesNeverAcceptFewer, ()) {
  // Context-free rows: a node accepts with probability a ≥ β (the first candidate alone is V1's
  // test), so E[depth] = Σ_d a^d ≥ Σ_d β^d.
  const TreeMethod method = *rc::gen::element(TreeMethod::kIid, TreeMethod::kSwor);
  const int vocab = *rc::gen::inRange(2, 5);
  const int gamma = *rc::gen::inRange(1, 3);
  const int branches = *rc::gen::inRange(2, std::min(vocab, 3) + 1);
  const Row p = *gen_row(vocab);
  const Row q = *gen_row(vocab, method == TreeMethod::kSwor ? branches : 1);
  const std::vector<Row> target(gamma + 1, p), draft(gamma, q);
  RC_ASSERT(enumerate_tree_step(target, draft, method, branches).expected_accepted >=
            enumerate_step(target, draft, Method{ChainMethod::kToken}).expected_accepted);
}

RC_GTEST_PROP(ExactTree, KseqAcceptsWithOneMinusRejectAllPower, ()) {
  // docs/verifiers.md V6: P(accept) = 1 − (1−β(ρ))^k at the node; ρ ∈ [1, k] with f(ρ) ≤ 0; the
  // float solver agrees with the exact bracket.
  const int vocab = *rc::gen::inRange(2, 5);
  const int k = *rc::gen::inRange(1, 5);
  const Row p = *gen_row(vocab);
  const Row q = *gen_row(vocab);
  const Q rho = kseq_rho(p, q, k);
  RC_ASSERT(rho >= 1);
  RC_ASSERT(rho <= k);
  const Q beta = kseq_beta(p, q, rho);
  Q reject_all = 1;
  for (int j = 0; j < k; ++j) reject_all *= 1 - beta;
  RC_ASSERT(1 - reject_all <= rho * beta);  // f(ρ) ≤ 0: the residual is non-negative
  // The enumerator's walk sums (1 − β)^j·β over the candidates, so comparing its acceptance with
  // 1 − (1 − β)^k alone would be true by its construction. The node is enumerated again here as
  // the process K-SEQ describes: every k-tuple of i.i.d. candidates c ~ q, each accepted by its
  // own coin with probability min(1, p(c)/(ρ·q(c))), the first acceptance wins and is followed by
  // the bonus from the child's row, and no acceptance draws from p_res ∝ p − min(q, p/ρ)·(1 −
  // (1 − β)^k)/β. Its acceptance must be 1 − (1 − β)^k and its law the walk's, exactly.
  const Row child = *gen_row(vocab);
  const StepResult step = enumerate_tree_step({p, child}, {q}, TreeMethod::kKseq, k);
  Distribution brute;
  Q accepted = 0;
  std::vector<int> tuple(k, 0);
  for (bool more = true; more;) {
    Q tuple_mass = 1;
    for (int c : tuple) tuple_mass *= q[c];
    if (tuple_mass > 0) {
      Q none_before = 1;  // P(candidates before j all rejected | tuple)
      for (int j = 0; j < k; ++j) {
        const int c = tuple[j];
        const Q accept = std::min(Q(1), Q(p[c] / (rho * q[c])));
        const Q first = Q(tuple_mass * none_before * accept);
        accepted += first;
        for (int b = 0; b < vocab; ++b) {
          if (first > 0 && child[b] > 0) brute[Sequence{c, b}] += first * child[b];
        }
        none_before *= 1 - accept;
      }
      if (none_before > 0) {
        const Q scale = beta == 0 ? Q(0) : Q((1 - reject_all) / beta);
        Q residual_total = 0;
        Row residual(vocab);
        for (int a = 0; a < vocab; ++a) {
          residual[a] = p[a] - std::min(q[a], Q(p[a] / rho)) * scale;
          residual_total += residual[a];
        }
        RC_ASSERT(residual_total > 0);
        for (int a = 0; a < vocab; ++a) {
          const Q mass = Q(tuple_mass * none_before * residual[a] / residual_total);
          if (mass > 0) brute[Sequence{a}] += mass;
        }
      }
    }
    int d = 0;  // next tuple in base V
    while (d < k && ++tuple[d] == vocab) tuple[d++] = 0;
    more = d < k;
  }
  RC_ASSERT(accepted == 1 - reject_all);
  RC_ASSERT(step.position_acceptance_marginal[0] == accepted);
  RC_ASSERT(step.distribution == brute);
  std::vector<float> pf, qf;
  for (const Q& x : p) pf.push_back(x.convert_to<float>());
  for (const Q& x : q) qf.push_back(x.convert_to<float>());
  RC_ASSERT(std::abs(speclab::kseq_rho(pf, qf, k) - rho.convert_to<double>()) < 1e-6);
}

TEST(ExactTree, KseqRhoOnSpecVectorIsTheQuadraticRoot) {
  // k = 2, ρ ∈ [1, 2]: β(ρ) = 1/(3ρ) + 1/3 and 1 − (1−β)² = ρβ ⇔ ρ = 2 − β ⇔ 3ρ² − 5ρ + 1 = 0,
  // ρ* = (5 + √13)/6 ≈ 1.434259, irrational: the exact bracket end lies just above it.
  const Q rho = kseq_rho(kSpecTarget, kSpecDraft, 2);
  const double root = (5.0 + std::sqrt(13.0)) / 6.0;
  EXPECT_NEAR(rho.convert_to<double>(), root, 1e-15);
  EXPECT_GE(3 * rho * rho - 5 * rho + 1, 0) << "ρ ≥ ρ*";
  const std::vector<float> pf{1.0f / 3, 2.0f / 3}, qf{2.0f / 3, 1.0f / 3};
  EXPECT_NEAR(speclab::kseq_rho(pf, qf, 2), root, 1e-6);  // float rows: 1/3 is not exact
  // k = 1 is V1: ρ = 1.
  EXPECT_EQ(kseq_rho(kSpecTarget, kSpecDraft, 1), 1);
}

TEST(ExactTree, TopkSoftmaxQIsLossy) {
  // The counterexample of proofs/v6_tree.md §3: V = 2, K = 1, γ = 1, q = (2/3, 1/3), p = (1/3,
  // 2/3). Top-1 of q is token 0, always. Verified with q as if it were drawn from q: accept with
  // min(1, p(0)/q(0)) = 1/2, else the residual norm(max(0, p − q)) = (0, 1). The first token is 0
  // with probability 1/2 ≠ p(0) = 1/3. The lossless top-k accepts with p(0) = 1/3 exactly.
  const StepResult lossy =
      enumerate_tree_step({kSpecTarget, kSpecTarget}, {kSpecDraft}, TreeMethod::kTopkSoftmaxQ, 1);
  EXPECT_EQ(lossy.first_token_marginal, (Row{Q(1, 2), Q(1, 2)}));
  EXPECT_EQ(total_probability(lossy.distribution), 1);
  const StepResult topk =
      enumerate_tree_step({kSpecTarget, kSpecTarget}, {kSpecDraft}, TreeMethod::kTopk, 1);
  EXPECT_EQ(topk.first_token_marginal, kSpecTarget);
  EXPECT_EQ(topk.expected_accepted, Q(1, 3));
  // And as a stream over a context-free chain.
  const MarkovChain target{2, {kSpecTarget, kSpecTarget}};
  const MarkovChain draft{2, {kSpecDraft, kSpecDraft}};
  EXPECT_NE(enumerate_tree_stream(target, draft, 0, 2, 1, 3, TreeMethod::kTopkSoftmaxQ),
            chain_distribution(target, 0, 3));
  EXPECT_EQ(enumerate_tree_stream(target, draft, 0, 2, 1, 3, TreeMethod::kTopk),
            chain_distribution(target, 0, 3));
}

TEST(ExactTree, SpecVectorValues) {
  // Two candidates over V = 2 without replacement or top-2 cover the vocabulary: one of them is
  // always accepted, E[depth] = γ. i.i.d.: a node accepts with 1 − P(both rejected); the first is
  // rejected w.p. 1/3 (only token 0, drawn w.p. 2/3, rejected w.p. 1/2), leaving p⁽²⁾ = (0, 1),
  // which accepts the second candidate only if it is 1 (w.p. 1/3): a = 1 − 1/3·2/3 = 7/9,
  // E = 7/9 + 49/81 = 112/81.
  const std::vector<Row> target(3, kSpecTarget), draft(2, kSpecDraft);
  EXPECT_EQ(enumerate_tree_step(target, draft, TreeMethod::kSwor, 2).expected_accepted, 2);
  EXPECT_EQ(enumerate_tree_step(target, draft, TreeMethod::kTopk, 2).expected_accepted, 2);
  EXPECT_EQ(enumerate_tree_step(target, draft, TreeMethod::kIid, 2).expected_accepted, Q(112, 81));
}

// Traversal verification (docs/verifiers.md V7, proofs/v7_traversal.md). Its enumerator walks the
// whole tree, so the shapes are smaller than above: V ≤ 4, K ≤ 3, γ ≤ 2 (at most 84² branches).
RC_GTEST_PROP(ExactTree, TraversalIsLosslessOneStep, ()) {
  const int vocab = *rc::gen::inRange(2, 5);
  const int gamma = *rc::gen::inRange(0, 3);
  const int branches = *rc::gen::inRange(1, std::min(vocab, 3) + 1);
  const std::vector<Row> probs_target = gen_rows(gamma + 1, vocab);
  const std::vector<Row> probs_draft = gen_rows(gamma, vocab, branches);
  const StepResult step =
      enumerate_tree_step(probs_target, probs_draft, TreeMethod::kTraversal, branches);
  RC_ASSERT(total_probability(step.distribution) == 1);
  RC_ASSERT(step.first_token_marginal == probs_target[0]);
  const auto violation = find_conditional_violation(step, probs_target);
  RC_ASSERT_FALSE(violation.has_value());
}

RC_GTEST_PROP(ExactTree, TraversalStreamsMatchTargetChain, ()) {
  // Markov rows: every node has the rows of its own token, so the walk's per-node state matters.
  const int vocab = *rc::gen::inRange(2, 4);
  const int gamma = *rc::gen::inRange(1, 3);
  const int branches = *rc::gen::inRange(1, vocab + 1);
  const int start = *rc::gen::inRange(0, vocab);
  const MarkovChain target{vocab, gen_rows(vocab, vocab)};
  const MarkovChain draft{vocab, gen_rows(vocab, vocab, branches)};
  const Distribution stream =
      enumerate_tree_stream(target, draft, start, gamma, branches, 3, TreeMethod::kTraversal);
  RC_ASSERT(stream == chain_distribution(target, start, 3));
}

RC_GTEST_PROP(ExactTree, TraversalOnAChainIsBlockVerification, ()) {
  // K = 1: one child per node, the tree is V5's draft chain and traversal is V5 (proofs/
  // v7_traversal.md §3): the same step law by position, and the same stream over Markov chains.
  const int vocab = *rc::gen::inRange(2, 5);
  const int gamma = *rc::gen::inRange(1, 4);
  const std::vector<Row> probs_target = gen_rows(gamma + 1, vocab);
  const std::vector<Row> probs_draft = gen_rows(gamma, vocab);
  const StepResult block = enumerate_step(probs_target, probs_draft, BlockMethod{});
  const StepResult traversal =
      enumerate_tree_step(probs_target, probs_draft, TreeMethod::kTraversal, 1);
  RC_ASSERT(traversal.distribution == block.distribution);
  RC_ASSERT(traversal.accepted_length == block.accepted_length);
  const int start = *rc::gen::inRange(0, vocab);
  const MarkovChain target{vocab, gen_rows(vocab, vocab)};
  const MarkovChain draft{vocab, gen_rows(vocab, vocab)};
  const int stream_gamma = std::min(gamma, 2);
  RC_ASSERT(
      enumerate_tree_stream(target, draft, start, stream_gamma, 1, 3, TreeMethod::kTraversal) ==
      enumerate_stream(target, draft, start, stream_gamma, 3, BlockMethod{}));
}

RC_GTEST_PROP(ExactTree, TraversalOfDepthOneIsRecursiveRejectionWithoutReplacement, ()) {
  // γ = 1: the children are leaves and the root's weight stays 1, so child j is tested with
  // min(1, P(c_j)/Q(c_j)) where P is the root's p after j − 1 residual updates norm((P − Q)⁺) and
  // Q is q without the deleted tokens, renormalised — tree-swor's test and residual, exactly.
  const int vocab = *rc::gen::inRange(2, 6);
  const int branches = *rc::gen::inRange(1, std::min(vocab, 4) + 1);
  const std::vector<Row> probs_target = gen_rows(2, vocab);
  const std::vector<Row> probs_draft = gen_rows(1, vocab, branches);
  RC_ASSERT(
      enumerate_tree_step(probs_target, probs_draft, TreeMethod::kTraversal, branches)
          .distribution ==
      enumerate_tree_step(probs_target, probs_draft, TreeMethod::kSwor, branches).distribution);
}

TEST(ExactTree, TraversalSpecVectorValues) {
  // K = 1 on the test vector is V5: E[τ] = 11/9 (proofs/v5_block.md §4), where tree-swor (V1 on a
  // chain) accepts 10/9. K = 2 over V = 2 holds every sequence; both then accept γ = 2 always
  // (the branch-by-branch walk of proofs/v7_traversal.md §4).
  const std::vector<Row> target(3, kSpecTarget), draft(2, kSpecDraft);
  EXPECT_EQ(enumerate_tree_step(target, draft, TreeMethod::kTraversal, 1).expected_accepted,
            Q(11, 9));
  EXPECT_EQ(enumerate_tree_step(target, draft, TreeMethod::kSwor, 1).expected_accepted, Q(10, 9));
  EXPECT_EQ(enumerate_tree_step(target, draft, TreeMethod::kTraversal, 2).expected_accepted, 2);
}

template <typename F>
void expect_invalid(F&& call, const std::string& needle) {
  try {
    call();
    ADD_FAILURE() << "expected InvalidInput mentioning '" << needle << "'";
  } catch (const InvalidInput& e) {
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
  }
}

TEST(ExactTree, RejectsBadInput) {
  const std::vector<Row> target(2, kSpecTarget), draft(1, kSpecDraft);
  expect_invalid([&] { enumerate_tree_step(target, draft, TreeMethod::kKseq, 0); },
                 "K-SEQ needs k ≥ 1");
  expect_invalid([&] { kseq_rho(kSpecTarget, kSpecDraft, 0); }, "K-SEQ k is 0");
  expect_invalid([&] { enumerate_tree_step(target, draft, TreeMethod::kSwor, 3); },
                 "branches K = 3 exceeds the support of probs_draft row 0");
  expect_invalid(
      [&] {
        enumerate_tree_step(target, {Row{Q(1), Q(0)}}, TreeMethod::kSwor, 2);
      },
      "(1 tokens with q > 0)");
  expect_invalid([&] { enumerate_tree_step(target, draft, TreeMethod::kTopk, 3); },
                 "exceeds the vocabulary V = 2");
  expect_invalid([&] { enumerate_tree_step(target, draft, TreeMethod::kTraversal, 3); },
                 "branches K = 3 exceeds the support of probs_draft row 0");
  {
    const Row uniform(8, Q(1, 8));
    expect_invalid(
        [&] {
          enumerate_tree_step(std::vector<Row>(5, uniform), std::vector<Row>(4, uniform),
                              TreeMethod::kTraversal, 4);
        },
        "traversal with V = 8, K = 4, γ = 4 enumerates about");
  }
  expect_invalid([&] { enumerate_tree_step(target, draft, TreeMethod::kIid, 5); },
                 "branches K is 5");
  expect_invalid(
      [&] {
        enumerate_tree_step(target, {Row{Q(1, 2), Q(1, 3)}}, TreeMethod::kIid, 1);
      },
      "probs_draft row 0 (depth 0) sums to 5/6");
}

}  // namespace
}  // namespace speclab::exact
