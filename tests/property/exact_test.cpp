// Exact rational checks of the chain-draft verifiers (docs/verifiers.md V1-V5, docs/testing.md
// "Exact checks first"): losslessness of one step and of a Markov-chain stream is an equality of
// rationals here, and the expected values in comments are derived by hand from docs/verifiers.md,
// not from the code under test.
#include "core/exact/exact.hpp"

#include <gtest/gtest.h>
#include <rapidcheck/gtest.h>

#include <algorithm>
#include <functional>
#include <numeric>
#include <optional>
#include <string>
#include <vector>

#include "core/base/error.hpp"
#include "tests/support/exact_rows.hpp"

namespace speclab::exact {
namespace {

Row make_row(std::initializer_list<Q> values) { return Row(values); }

rc::Gen<Row> gen_row(int vocab) { return testing::gen_exact_row(vocab); }
std::vector<Row> gen_rows(int count, int vocab) { return testing::gen_exact_rows(count, vocab); }
MarkovChain gen_chain(int vocab) { return testing::gen_exact_chain(vocab); }

Q total_probability(const Distribution& distribution) {
  Q total = 0;
  for (const auto& [sequence, probability] : distribution) total += probability;
  return total;
}

Q beta(const Row& probs_target, const Row& probs_draft) {
  Q sum = 0;
  for (size_t a = 0; a < probs_target.size(); ++a) {
    sum += std::min(probs_target[a], probs_draft[a]);
  }
  return sum;
}

// docs/verifiers.md test vector (V5): q = (2/3, 1/3), p = (1/3, 2/3), γ = 2.
const Row kSpecDraft = make_row({Q(2, 3), Q(1, 3)});
const Row kSpecTarget = make_row({Q(1, 3), Q(2, 3)});

TEST(Exact, SpecTestVectorAcceptsTenNinths) {
  // β = Σ_x min(p(x), q(x)) = min(1/3, 2/3) + min(2/3, 1/3) = 2/3 at each position.
  // Position 2 is reached only through position 1, and the rows do not depend on context, so
  // P(n ≥ 1) = β = 2/3, P(n ≥ 2) = β² = 4/9 and E[accepted] = 2/3 + 4/9 = 10/9 (bonus not counted).
  // The residual max(0, p − q) = (0, 1/3) normalises to (0, 1): a rejection always emits token 1,
  // so P(emitted = [1]) = P(reject at position 1) = 1 − β = 1/3.
  const StepResult step = enumerate_step({kSpecTarget, kSpecTarget, kSpecTarget},
                                         {kSpecDraft, kSpecDraft}, Method{ChainMethod::kToken});
  EXPECT_EQ(step.expected_accepted, Q(10, 9));
  EXPECT_EQ(step.expected_emitted, Q(19, 9));
  EXPECT_EQ(step.position_acceptance_marginal, (std::vector<Q>{Q(2, 3), Q(4, 9)}));
  // Given position 2 is reached (position 1 accepted), it is accepted with β again: 4/9 / 2/3.
  EXPECT_EQ(step.position_acceptance_conditional,
            (std::vector<std::optional<Q>>{Q(2, 3), Q(2, 3)}));
  EXPECT_EQ(step.accepted_length, (std::vector<Q>{Q(1, 3), Q(2, 9), Q(4, 9)}));
  EXPECT_EQ(step.distribution.at(Sequence{1}), Q(1, 3));
  EXPECT_EQ(step.distribution.count(Sequence{0}), 0u) << "the residual never emits token 0";
  EXPECT_EQ(step.first_token_marginal, kSpecTarget);
  EXPECT_EQ(total_probability(step.distribution), 1);
}

RC_GTEST_PROP(Exact, TokenStepIsLossless, ()) {
  const int vocab = *rc::gen::inRange(2, 5);
  const int gamma = *rc::gen::inRange(1, 4);
  const std::vector<Row> probs_target = gen_rows(gamma + 1, vocab);
  const std::vector<Row> probs_draft = gen_rows(gamma, vocab);
  const StepResult step = enumerate_step(probs_target, probs_draft, Method{ChainMethod::kToken});
  RC_ASSERT(total_probability(step.distribution) == 1);
  RC_ASSERT(step.first_token_marginal == probs_target[0]);
  const auto violation = find_conditional_violation(step, probs_target);
  RC_ASSERT_FALSE(violation.has_value());
}

RC_GTEST_PROP(Exact, TokenExpectedAcceptedMatchesClosedForm, ()) {
  // docs/verifiers.md V1: position i is accepted iff positions 1..i all are, each with probability
  // β_j independently of the others for context-free rows, so E[n] = Σ_i Π_{j≤i} β_j.
  const int vocab = *rc::gen::inRange(2, 5);
  const int gamma = *rc::gen::inRange(1, 4);
  const std::vector<Row> probs_target = gen_rows(gamma + 1, vocab);
  const std::vector<Row> probs_draft = gen_rows(gamma, vocab);
  const StepResult step = enumerate_step(probs_target, probs_draft, Method{ChainMethod::kToken});
  Q expected = 0;
  Q reach = 1;
  for (int i = 0; i < gamma; ++i) {
    reach *= beta(probs_target[i], probs_draft[i]);
    RC_ASSERT(step.position_acceptance_marginal[i] == reach);
    expected += reach;
  }
  RC_ASSERT(step.expected_accepted == expected);
  RC_ASSERT(step.expected_emitted == expected + 1);
}

RC_GTEST_PROP(Exact, DraftEqualsTargetAcceptsEverything, ()) {
  const int vocab = *rc::gen::inRange(2, 5);
  const int gamma = *rc::gen::inRange(1, 4);
  const std::vector<Row> probs_target = gen_rows(gamma + 1, vocab);
  const std::vector<Row> probs_draft(probs_target.begin(), probs_target.end() - 1);
  const StepResult step = enumerate_step(probs_target, probs_draft, Method{ChainMethod::kToken});
  RC_ASSERT(step.expected_accepted == gamma);
  RC_ASSERT(step.accepted_length[gamma] == 1);
}

TEST(Exact, DisjointSupportsAcceptNothing) {
  // β = 0: every draft is rejected and the residual is p itself.
  const Row probs_target = make_row({Q(0), Q(1, 4), Q(3, 4)});
  const Row probs_draft = make_row({Q(1), Q(0), Q(0)});
  const StepResult step = enumerate_step({probs_target, probs_target, probs_target},
                                         {probs_draft, probs_draft}, Method{ChainMethod::kToken});
  EXPECT_EQ(step.expected_accepted, 0);
  EXPECT_EQ(step.distribution, (Distribution{{Sequence{1}, Q(1, 4)}, {Sequence{2}, Q(3, 4)}}));
  // Position 1 is tested and never accepted; position 2 is never reached, so it has no
  // conditional rate.
  EXPECT_EQ(step.position_acceptance_marginal, (std::vector<Q>{Q(0), Q(0)}));
  EXPECT_EQ(step.position_acceptance_conditional,
            (std::vector<std::optional<Q>>{Q(0), std::nullopt}));
}

RC_GTEST_PROP(Exact, GreedyStepIsLosslessAgainstArgmax, ()) {
  // docs/verifiers.md V2: every emitted token is the argmax of its row, so the conditionals are
  // one-hot.
  const int vocab = *rc::gen::inRange(2, 5);
  const int gamma = *rc::gen::inRange(1, 4);
  const std::vector<Row> probs_target = gen_rows(gamma + 1, vocab);
  const std::vector<Row> probs_draft = gen_rows(gamma, vocab);
  const StepResult step = enumerate_step(probs_target, probs_draft, Method{ChainMethod::kGreedy});
  std::vector<Row> argmax_rows;
  for (const Row& row : probs_target) argmax_rows.push_back(one_hot_argmax(row));
  RC_ASSERT(total_probability(step.distribution) == 1);
  const auto violation = find_conditional_violation(step, argmax_rows);
  RC_ASSERT_FALSE(violation.has_value());
}

TEST(Exact, GreedyBreaksTiesTowardsLowestId) {
  const Row tied = make_row({Q(1, 4), Q(3, 8), Q(3, 8)});
  EXPECT_EQ(one_hot_argmax(tied), make_row({Q(0), Q(1), Q(0)}));
}

TEST(Exact, LenientBelowOneIsLossy) {
  // docs/verifiers.md V3 on the test vector, l = 1/2: l·q = (1/3, 1/6), so min(1, p/(l q)) = (1, 1)
  // and every draft is accepted. The first token is then x_1 ~ q: marginal (2/3, 1/3) ≠ p, and
  // E[accepted] = γ = 2.
  const Method half{ChainMethod::kLenient, Q(1, 2)};
  const StepResult all_accepted =
      enumerate_step({kSpecTarget, kSpecTarget, kSpecTarget}, {kSpecDraft, kSpecDraft}, half);
  EXPECT_EQ(all_accepted.first_token_marginal, kSpecDraft);
  EXPECT_EQ(all_accepted.expected_accepted, 2);

  // l = 3/4: l·q = (1/2, 1/4); token 0 is accepted with (1/3)/(1/2) = 2/3, token 1 always.
  // P(reject at 1) = q(0)·(1 − 2/3) = 2/9; residual max(0, p − l q) = (0, 5/12) → token 1.
  // P(first = 0) = q(0)·2/3 = 4/9; P(first = 1) = q(1) + 2/9 = 5/9. p = (3/9, 6/9): lossy.
  const Method three_quarters{ChainMethod::kLenient, Q(3, 4)};
  const StepResult step = enumerate_step({kSpecTarget, kSpecTarget, kSpecTarget},
                                         {kSpecDraft, kSpecDraft}, three_quarters);
  EXPECT_EQ(step.first_token_marginal, make_row({Q(4, 9), Q(5, 9)}));
  EXPECT_NE(step.first_token_marginal, kSpecTarget);
  EXPECT_TRUE(
      find_conditional_violation(step, {kSpecTarget, kSpecTarget, kSpecTarget}).has_value());
  EXPECT_EQ(total_probability(step.distribution), 1);
}

RC_GTEST_PROP(Exact, LenientAtOneEqualsToken, ()) {
  const int vocab = *rc::gen::inRange(2, 5);
  const int gamma = *rc::gen::inRange(1, 4);
  const std::vector<Row> probs_target = gen_rows(gamma + 1, vocab);
  const std::vector<Row> probs_draft = gen_rows(gamma, vocab);
  const StepResult token = enumerate_step(probs_target, probs_draft, Method{ChainMethod::kToken});
  const StepResult lenient =
      enumerate_step(probs_target, probs_draft, Method{ChainMethod::kLenient, Q(1)});
  RC_ASSERT(lenient.distribution == token.distribution);
  RC_ASSERT(lenient.expected_accepted == token.expected_accepted);
}

RC_GTEST_PROP(Exact, TokenStreamMatchesTargetChain, ()) {
  // Several steps over Markov chains: the target rows depend on the draft tokens before them and
  // each step restarts from the last emitted token, so a context or rollback bug changes the
  // joint distribution of the stream.
  const int vocab = *rc::gen::inRange(2, 4);
  const int gamma = *rc::gen::inRange(0, 4);
  const int length = *rc::gen::inRange(3, 5);
  const int start = *rc::gen::inRange(0, vocab);
  const MarkovChain target = gen_chain(vocab);
  const MarkovChain draft = gen_chain(vocab);
  const Distribution stream =
      enumerate_stream(target, draft, start, gamma, length, Method{ChainMethod::kToken});
  const Distribution plain = chain_distribution(target, start, length);
  RC_ASSERT(total_probability(plain) == 1);
  RC_ASSERT(stream == plain);
  // The decoding engine drafts fewer tokens near the end (γ_b = min(γ, tokens left - 1)); the
  // stream is still the target chain.
  const bool capped = true;
  RC_ASSERT(enumerate_stream(target, draft, start, gamma, length, Method{ChainMethod::kToken},
                             capped) == plain);
}

RC_GTEST_PROP(Exact, GreedyStreamMatchesGreedyChain, ()) {
  const int vocab = *rc::gen::inRange(2, 4);
  const int gamma = *rc::gen::inRange(0, 4);
  const int length = *rc::gen::inRange(3, 5);
  const int start = *rc::gen::inRange(0, vocab);
  const MarkovChain target = gen_chain(vocab);
  const MarkovChain draft = gen_chain(vocab);
  const Distribution stream =
      enumerate_stream(target, draft, start, gamma, length, Method{ChainMethod::kGreedy});
  RC_ASSERT(stream == (Distribution{{greedy_chain(target, start, length), Q(1)}}));
}

RC_GTEST_PROP(Exact, LenientStreamAtOneEqualsTargetChain, ()) {
  const int vocab = *rc::gen::inRange(2, 4);
  const int gamma = *rc::gen::inRange(1, 4);
  const int start = *rc::gen::inRange(0, vocab);
  const MarkovChain target = gen_chain(vocab);
  const MarkovChain draft = gen_chain(vocab);
  const Distribution stream =
      enumerate_stream(target, draft, start, gamma, 3, Method{ChainMethod::kLenient, Q(1)});
  RC_ASSERT(stream == chain_distribution(target, start, 3));
}

TEST(Exact, LenientStreamBelowOneIsNotTargetChain) {
  // The test vector as a chain whose rows ignore the previous token: by LenientBelowOneIsLossy
  // the first token already has marginal (4/9, 5/9) instead of (1/3, 2/3).
  const MarkovChain target{2, {kSpecTarget, kSpecTarget}};
  const MarkovChain draft{2, {kSpecDraft, kSpecDraft}};
  const Distribution stream =
      enumerate_stream(target, draft, 0, 2, 3, Method{ChainMethod::kLenient, Q(3, 4)});
  EXPECT_NE(stream, chain_distribution(target, 0, 3));
  EXPECT_EQ(total_probability(stream), 1);
  Q first_is_zero = 0;
  for (const auto& [sequence, probability] : stream) {
    if (sequence.front() == 0) first_is_zero += probability;
  }
  EXPECT_EQ(first_is_zero, Q(4, 9));
}

TEST(Exact, ChainDistributionIsTheProductOfTransitions) {
  // P(0, 1 | start 1) = T[1][0]·T[0][1] = 1/2 · 1/3 = 1/6.
  const MarkovChain chain{2, {make_row({Q(2, 3), Q(1, 3)}), make_row({Q(1, 2), Q(1, 2)})}};
  const Distribution joint = chain_distribution(chain, 1, 2);
  EXPECT_EQ(joint.at(Sequence{0, 1}), Q(1, 6));
  EXPECT_EQ(total_probability(joint), 1);
  EXPECT_EQ(greedy_chain(chain, 1, 3), (Sequence{0, 0, 0}));
}

// Expects InvalidInput whose message contains `needle`.
template <typename F>
void expect_invalid(F&& call, const std::string& needle) {
  try {
    call();
    ADD_FAILURE() << "expected InvalidInput mentioning '" << needle << "'";
  } catch (const InvalidInput& e) {
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
  }
}

TEST(Exact, RejectsBadRows) {
  const Method token{ChainMethod::kToken};
  const Row third = make_row({Q(1, 3), Q(1, 3)});
  expect_invalid(
      [&] {
        enumerate_step({kSpecTarget, third}, {kSpecDraft}, token);
      },
      "probs_target row 1 (position 2) sums to 2/3");
  expect_invalid(
      [&] {
        enumerate_step({kSpecTarget, kSpecTarget}, {make_row({Q(4, 3), Q(-1, 3)})}, token);
      },
      "probs_draft row 0 (position 1) entry 1 is -1/3");
  expect_invalid([&] { enumerate_step({kSpecTarget}, {kSpecDraft}, token); },
                 "probs_target has 1 rows; expected γ+1 = 2");
  expect_invalid(
      [&] {
        enumerate_step({kSpecTarget, kSpecTarget}, {make_row({Q(1)})}, token);
      },
      "probs_draft row 0 (position 1) has 1 entries; expected V = 2");
  expect_invalid(
      [&] {
        enumerate_step(std::vector<Row>(6, kSpecTarget), std::vector<Row>(5, kSpecDraft), token);
      },
      "gamma is 5");
  expect_invalid([&] { enumerate_step({Row(9, Q(1, 9))}, {}, token); }, "V = 9");
  expect_invalid(
      [&] {
        enumerate_step({kSpecTarget, kSpecTarget}, {kSpecDraft}, Method{ChainMethod::kLenient, 0});
      },
      "leniency is 0/1");
  expect_invalid(
      [&] {
        enumerate_step({kSpecTarget, kSpecTarget}, {kSpecDraft},
                       Method{ChainMethod::kLenient, Q(3, 2)});
      },
      "leniency is 3/2");
}

TEST(Exact, RejectsBadStreams) {
  const MarkovChain chain{2, {kSpecTarget, kSpecTarget}};
  const Method token{ChainMethod::kToken};
  expect_invalid([&] { enumerate_stream(chain, chain, 2, 1, 3, token); }, "start token is 2");
  expect_invalid([&] { enumerate_stream(chain, chain, 0, -1, 3, token); }, "gamma is -1");
  expect_invalid([&] { enumerate_stream(chain, chain, 0, 1, 0, token); }, "length is 0");
  const MarkovChain wide{8, std::vector<Row>(8, Row(8, Q(1, 8)))};
  expect_invalid([&] { chain_distribution(wide, 0, 5); }, "V^L = 8^5 = 32768");
  const MarkovChain bad{2, {kSpecTarget, make_row({Q(1), Q(1)})}};
  expect_invalid([&] { enumerate_stream(chain, bad, 0, 1, 3, token); },
                 "draft chain row 1 (after token 1) sums to 2/1");
  const MarkovChain three{3, std::vector<Row>(3, Row(3, Q(1, 3)))};
  expect_invalid([&] { enumerate_stream(chain, three, 0, 1, 3, token); }, "draft chain has V = 3");
}

// ---- V5 block verification ----

TEST(Exact, BlockSpecTestVectorAcceptsElevenNinths) {
  // docs/verifiers.md V5 test vector, by hand over the four draft blocks (probability q(x1)·q(x2)):
  //   (0,0) 4/9: w = (1/2, 1/4), Z_1 = 0 so h_1 = 0, h_2 = 1/4: τ = 2 w.p. 1/4, else 0.
  //   (0,1) 2/9: w = (1/2, 1), h_1 = 0, h_2 = 1: τ = 2.
  //   (1,0) 2/9: w = (1, 1/2), Z_1 = 1/3, h_1 = (1/3)/(1/3 + 0) = 1, h_2 = 1/2: τ = 2 or 1.
  //   (1,1) 1/9: w = (1, 1), h_2 = 1: τ = 2.
  // E[τ] = 4/9·1/2 + 2/9·2 + 2/9·3/2 + 1/9·2 = (2 + 4 + 3 + 2)/9 = 11/9, above V1's 10/9.
  const std::vector<Row> target{kSpecTarget, kSpecTarget, kSpecTarget};
  const std::vector<Row> draft{kSpecDraft, kSpecDraft};
  const StepResult block = enumerate_step(target, draft, BlockMethod{});
  const StepResult token = enumerate_step(target, draft, Method{ChainMethod::kToken});
  EXPECT_EQ(block.expected_accepted, Q(11, 9));
  EXPECT_EQ(token.expected_accepted, Q(10, 9));
  // P(τ = 2) = 4/9·1/4 + 2/9 + 2/9·1/2 + 1/9 = 1/9 + 2/9 + 1/9 + 1/9 = 5/9; P(τ = 1) = 1/9.
  EXPECT_EQ(block.accepted_length, (std::vector<Q>{Q(1, 3), Q(1, 9), Q(5, 9)}));
  EXPECT_EQ(block.first_token_marginal, kSpecTarget);
  EXPECT_EQ(total_probability(block.distribution), 1);
  EXPECT_FALSE(find_conditional_violation(block, target).has_value());
}

RC_GTEST_PROP(Exact, BlockStepIsLossless, ()) {
  const int vocab = *rc::gen::inRange(2, 5);
  const int gamma = *rc::gen::inRange(0, 4);
  const std::vector<Row> probs_target = gen_rows(gamma + 1, vocab);
  const std::vector<Row> probs_draft = gen_rows(gamma, vocab);
  const StepResult step = enumerate_step(probs_target, probs_draft, BlockMethod{});
  RC_ASSERT(total_probability(step.distribution) == 1);
  RC_ASSERT(step.first_token_marginal == probs_target[0]);
  const auto violation = find_conditional_violation(step, probs_target);
  RC_ASSERT_FALSE(violation.has_value());
}

RC_GTEST_PROP(Exact, BlockNeverAcceptsFewerThanToken, ()) {
  // docs/verifiers.md V5: optimal among verifiers that see the block, so E[τ] ≥ V1's E[n], exactly.
  const int vocab = *rc::gen::inRange(2, 5);
  const int gamma = *rc::gen::inRange(1, 4);
  const std::vector<Row> probs_target = gen_rows(gamma + 1, vocab);
  const std::vector<Row> probs_draft = gen_rows(gamma, vocab);
  const StepResult block = enumerate_step(probs_target, probs_draft, BlockMethod{});
  const StepResult token = enumerate_step(probs_target, probs_draft, Method{ChainMethod::kToken});
  RC_ASSERT(block.expected_accepted >= token.expected_accepted);
}

RC_GTEST_PROP(Exact, BlockWithOneDraftEqualsToken, ()) {
  // γ = 1: h_1 = w_1 = min(1, p/q) is V1's acceptance and the residual is V1's.
  const int vocab = *rc::gen::inRange(2, 6);
  const std::vector<Row> probs_target = gen_rows(2, vocab);
  const std::vector<Row> probs_draft = gen_rows(1, vocab);
  RC_ASSERT(enumerate_step(probs_target, probs_draft, BlockMethod{}).distribution ==
            enumerate_step(probs_target, probs_draft, Method{ChainMethod::kToken}).distribution);
}

RC_GTEST_PROP(Exact, BlockStreamMatchesTargetChain, ()) {
  // Markov rows: w_i and h_i read p_{i+1}, q_{i+1} of the context x_{≤i}, so a context bug in the
  // block weights changes this joint law.
  const int vocab = *rc::gen::inRange(2, 4);
  const int gamma = *rc::gen::inRange(0, 4);
  const int length = *rc::gen::inRange(3, 5);
  const int start = *rc::gen::inRange(0, vocab);
  const MarkovChain target = gen_chain(vocab);
  const MarkovChain draft = gen_chain(vocab);
  const Distribution plain = chain_distribution(target, start, length);
  RC_ASSERT(enumerate_stream(target, draft, start, gamma, length, BlockMethod{}) == plain);
  const bool capped = true;
  RC_ASSERT(enumerate_stream(target, draft, start, gamma, length, BlockMethod{}, capped) == plain);
}

// V5 written from docs/verifiers.md V5 steps 1-4 as a StepLaw of its own, with τ chosen either
// as the largest passing i (V5) or as the last i before the first failing one (the mutant of
// docs/testing.md "Mutants"), so that the mutant's law is enumerated, not argued about. Drafts
// x_i ~ q_i are walked one position at a time; at γ the weights w_i, h_i are computed in
// rationals, the law of τ follows from independent η_i, and τ emits x_1..x_τ plus the bonus
// (τ = γ) or one token of norm((w_τ·p_{τ+1} − q_{τ+1})⁺) (p_{τ+1} when that has no mass).
StepLaw block_law_with_tau(bool first_failure) {
  return [first_failure](const RowAt& target, const RowAt& draft, int gamma, int previous,
                         const EmitLeaf& emit) {
    Sequence drafts;
    std::function<void(int, const Q&)> walk = [&](int before, const Q& mass) {
      const int i = static_cast<int>(drafts.size());
      if (i < gamma) {
        const Row& q = draft(i, before);
        for (size_t x = 0; x < q.size(); ++x) {
          if (q[x] == 0) continue;
          drafts.push_back(static_cast<int>(x));
          walk(static_cast<int>(x), Q(mass * q[x]));
          drafts.pop_back();
        }
        return;
      }
      // p_{i+1}, q_{i+1} (0-based index i) read after x_i; x_0 is the context.
      const auto before_of = [&](int index) { return index == 0 ? previous : drafts[index - 1]; };
      std::vector<Q> w(gamma + 1, Q(1)), h(gamma + 1, Q(1));
      for (int k = 1; k <= gamma; ++k) {
        const Row& p = target(k - 1, before_of(k - 1));
        const Row& q = draft(k - 1, before_of(k - 1));
        const int x = drafts[k - 1];
        w[k] = q[x] == 0 ? Q(0) : std::min(Q(1), Q(w[k - 1] * p[x] / q[x]));
      }
      for (int k = 1; k < gamma; ++k) {
        const Row& p = target(k, before_of(k));
        const Row& q = draft(k, before_of(k));
        Q z = 0;
        for (size_t a = 0; a < p.size(); ++a) z += std::max(Q(0), Q(w[k] * p[a] - q[a]));
        const Q den = z + 1 - w[k];
        h[k] = den == 0 ? Q(1) : Q(z / den);
      }
      if (gamma > 0) h[gamma] = w[gamma];
      for (int tau = 0; tau <= gamma; ++tau) {
        Q p_tau = 1;  // P(τ = tau) for independent η_i ~ U(0, 1)
        if (first_failure) {
          for (int k = 1; k <= tau; ++k) p_tau *= h[k];
          if (tau < gamma) p_tau *= 1 - h[tau + 1];
        } else {
          if (tau > 0) p_tau *= h[tau];
          for (int k = tau + 1; k <= gamma; ++k) p_tau *= 1 - h[k];
        }
        if (p_tau == 0) continue;
        const Row& p = target(tau, before_of(tau));
        Row last = p;
        if (tau < gamma) {
          const Row& q = draft(tau, before_of(tau));
          Q total = 0;
          for (size_t a = 0; a < p.size(); ++a) {
            last[a] = std::max(Q(0), Q(w[tau] * p[a] - q[a]));
            total += last[a];
          }
          if (total == 0) {
            last = p;
          } else {
            for (Q& x : last) x /= total;
          }
        }
        Sequence emitted(drafts.begin(), drafts.begin() + tau);
        for (size_t a = 0; a < last.size(); ++a) {
          if (last[a] == 0) continue;
          emitted.push_back(static_cast<int>(a));
          emit(emitted, tau, Q(mass * p_tau * last[a]));
          emitted.pop_back();
        }
      }
    };
    walk(previous, Q(1));
  };
}

TEST(Exact, FirstFailureInsteadOfLastPassIsLossy) {
  // The mutant of docs/testing.md "Mutants": τ = the last i before the first failing η_i, instead
  // of the last passing i. The law above with the last pass is the enumerator's V5 law exactly
  // (so the walk is right); with the first failure it is not the target's. On the test vector a
  // block starting with x_1 = 0 has h_1 = 0 (Z_1 = 0), so the mutant stops at τ = 0 there and
  // emits the residual (0, 1); blocks starting with 1 emit 1 first: the mutant never emits token
  // 0 first, marginal (0, 1) ≠ p = (1/3, 2/3). V5 reaches token 0 through the later pass h_2 of
  // blocks (0,0) and (0,1).
  const std::vector<Row> target{kSpecTarget, kSpecTarget, kSpecTarget};
  const std::vector<Row> draft{kSpecDraft, kSpecDraft};
  const StepResult block = enumerate_step(target, draft, BlockMethod{});
  EXPECT_EQ(block.first_token_marginal, kSpecTarget);
  EXPECT_EQ(enumerate_step_with(target, draft, block_law_with_tau(false)).distribution,
            block.distribution);
  const StepResult mutant = enumerate_step_with(target, draft, block_law_with_tau(true));
  EXPECT_EQ(mutant.first_token_marginal, (Row{Q(0), Q(1)}));
  EXPECT_NE(mutant.distribution, block.distribution);
  EXPECT_TRUE(find_conditional_violation(mutant, target).has_value());
  EXPECT_EQ(block.distribution.at(Sequence{0, 1, 0}) + block.distribution.at(Sequence{0, 1, 1}),
            Q(2, 9))
      << "block (0,1) has h_1 = 0 but h_2 = 1: V5 keeps both tokens";
}

RC_GTEST_PROP(Exact, BlockLawWithLastPassIsTheEnumeratorsV5, ()) {
  // The walk above, with the last pass, on generated rows: it is the enumerator's V5 law exactly,
  // so the mutant's law it gives with the first failure is V5 with that one change.
  const int vocab = *rc::gen::inRange(2, 4);
  const int gamma = *rc::gen::inRange(0, 4);
  const std::vector<Row> target = gen_rows(gamma + 1, vocab);
  const std::vector<Row> draft = gen_rows(gamma, vocab);
  RC_ASSERT(enumerate_step_with(target, draft, block_law_with_tau(false)).distribution ==
            enumerate_step(target, draft, BlockMethod{}).distribution);
}

// ---- V4 typical acceptance ----

TEST(Exact, TypicalIsLossyOnTheSpecVector) {
  // p = (1/3, 2/3): H = −(1/3 ln(1/3 + 1e-5) + 2/3 ln(2/3 + 1e-5)) ≈ 0.6365, δ·e^−H ≈ 0.159, so the
  // threshold is ε = 0.09 and both tokens pass: every draft is accepted, the first token is x_1 ~
  // q.
  const TypicalMethod typical;
  EXPECT_TRUE(typical_passes(kSpecTarget, 0, typical));
  EXPECT_TRUE(typical_passes(kSpecTarget, 1, typical));
  const StepResult step =
      enumerate_step({kSpecTarget, kSpecTarget, kSpecTarget}, {kSpecDraft, kSpecDraft}, typical);
  EXPECT_EQ(step.expected_accepted, 2);
  EXPECT_EQ(step.first_token_marginal, kSpecDraft);
  EXPECT_NE(step.first_token_marginal, kSpecTarget);
  EXPECT_EQ(total_probability(step.distribution), 1);
  const MarkovChain target{2, {kSpecTarget, kSpecTarget}};
  const MarkovChain draft{2, {kSpecDraft, kSpecDraft}};
  EXPECT_NE(enumerate_stream(target, draft, 0, 2, 3, typical), chain_distribution(target, 0, 3));
}

TEST(Exact, TypicalRejectsBelowThreshold) {
  // p = (1/20, 19/20): H ≈ 0.1985, δ·e^−H ≈ 0.246, threshold min(0.09, 0.246) = 0.09 > 1/20, so
  // token 0 fails; q = (1/2, 1/2): P(n = 0) = 1/2 (x_1 = 0) and then the token comes from p_1.
  const Row p = make_row({Q(1, 20), Q(19, 20)});
  const Row q = make_row({Q(1, 2), Q(1, 2)});
  const TypicalMethod typical;
  EXPECT_FALSE(typical_passes(p, 0, typical));
  EXPECT_TRUE(typical_passes(p, 1, typical));
  const StepResult step = enumerate_step({p, p}, {q}, typical);
  EXPECT_EQ(step.accepted_length, (std::vector<Q>{Q(1, 2), Q(1, 2)}));
  // First token: 1 from acceptance (1/2) plus p_1 after a failure: 1/2·(1/20, 19/20).
  EXPECT_EQ(step.first_token_marginal, make_row({Q(1, 40), Q(39, 40)}));
}

TEST(Exact, TypicalRejectsBadParameters) {
  const std::vector<Row> target{kSpecTarget, kSpecTarget};
  const std::vector<Row> draft{kSpecDraft};
  expect_invalid(
      [&] {
        enumerate_step(target, draft, TypicalMethod{0.0, 0.3});
      },
      "typical epsilon is 0");
  expect_invalid(
      [&] {
        enumerate_step(target, draft, TypicalMethod{-1.0, 0.3});
      },
      "typical epsilon is -1");
  expect_invalid(
      [&] {
        enumerate_step(target, draft, TypicalMethod{0.09, 0.0});
      },
      "typical delta is 0");
}

TEST(Exact, ParsesRationalsExactly) {
  EXPECT_EQ(parse_rational("1/3", "--x"), Q(1, 3));
  EXPECT_EQ(parse_rational("2", "--x"), Q(2));
  EXPECT_EQ(parse_rational("0.25", "--x"), Q(1, 4));
  EXPECT_EQ(parse_rational("0.1", "--x"), Q(1, 10)) << "never through a double";
  EXPECT_EQ(parse_rational(".5", "--x"), Q(1, 2));
  EXPECT_EQ(parse_rational("010/03", "--x"), Q(10, 3)) << "leading zeros are decimal, not octal";
  EXPECT_EQ(parse_rational("0.0", "--x"), Q(0));
  EXPECT_EQ(parse_rational("3.", "--x"), Q(3));
  EXPECT_EQ(parse_rational(" -2/4 ", "--x"), Q(-1, 2));
  EXPECT_EQ(parse_rational_row("1/3, 2/3", "--x"), make_row({Q(1, 3), Q(2, 3)}));
  EXPECT_EQ(to_fraction_string(Q(10, 9)), "10/9");
  EXPECT_EQ(to_fraction_string(Q(1)), "1/1");
  EXPECT_EQ(sequence_key(Sequence{0, 1}), "0,1");
  for (const char* bad : {"abc", "", "1/", "/3", "1/0", "1e-3", "0x1", "1.2.3", ".", "-", "1/-3",
                          "1 /3", "inf", "nan"}) {
    expect_invalid([&] { parse_rational(bad, "--target"); }, "--target");
  }
  expect_invalid([&] { parse_rational_row("1/3,,2/3", "--draft"); }, "--draft: entry 1");
}

}  // namespace
}  // namespace speclab::exact
