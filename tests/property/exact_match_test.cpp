// Exact rational checks of the match verifiers (docs/verifiers.md V8, proofs/match_verifiers.md):
// both are lossless for one step and over Markov streams, whatever the draft; their acceptance is
// the closed form (coupled: Σ_y 1 / Σ_u max(p_u/p_y, q_u/q_y); sampled-match: Σ p·q), coupled's
// is at least (1 − TV)/(1 + TV) and is 1 when q = p; and the float acceptances the engines record
// agree with the rationals. Hand-derived values are derived in the comments.
#include <gtest/gtest.h>
#include <rapidcheck/gtest.h>

#include <algorithm>
#include <vector>

#include "core/exact/exact.hpp"
#include "core/verify/verify_match.hpp"
#include "tests/support/exact_rows.hpp"

namespace speclab::exact {
namespace {

using testing::gen_exact_chain;
using testing::gen_exact_rows;

Q agreement(const Row& p, const Row& q, MatchMethod method) {
  return method == MatchMethod::kCoupled ? coupled_agreement(p, q) : sampled_match_agreement(p, q);
}

MatchMethod gen_method() {
  return *rc::gen::element(MatchMethod::kCoupled, MatchMethod::kSampledMatch);
}

RC_GTEST_PROP(ExactMatch, StepIsLossless, ()) {
  const MatchMethod method = gen_method();
  const int vocab = *rc::gen::inRange(2, 5);
  const int gamma = *rc::gen::inRange(1, 4);
  const std::vector<Row> probs_target = gen_exact_rows(gamma + 1, vocab);
  const std::vector<Row> probs_draft = gen_exact_rows(gamma, vocab);
  const StepResult step = enumerate_step(probs_target, probs_draft, method);
  RC_ASSERT(step.first_token_marginal == probs_target[0]);
  RC_ASSERT_FALSE(find_conditional_violation(step, probs_target).has_value());
}

RC_GTEST_PROP(ExactMatch, StreamMatchesTargetChain, ()) {
  const MatchMethod method = gen_method();
  const int vocab = *rc::gen::inRange(2, 4);
  const int gamma = *rc::gen::inRange(0, 4);
  const int length = *rc::gen::inRange(3, 5);
  const int start = *rc::gen::inRange(0, vocab);
  const MarkovChain target = gen_exact_chain(vocab);
  const MarkovChain draft = gen_exact_chain(vocab);
  const Distribution plain = chain_distribution(target, start, length);
  RC_ASSERT(enumerate_stream(target, draft, start, gamma, length, method) == plain);
  RC_ASSERT(enumerate_stream(target, draft, start, gamma, length, method, true) == plain);
}

RC_GTEST_PROP(ExactMatch, ExpectedAcceptedIsTheProductOfAgreements, ()) {
  // Context-free rows: position i is accepted iff 1..i all are, independently (the noise of
  // different output positions is independent), so E[n] = Σ_i Π_{j≤i} a_j.
  const MatchMethod method = gen_method();
  const int vocab = *rc::gen::inRange(2, 5);
  const int gamma = *rc::gen::inRange(1, 4);
  const std::vector<Row> probs_target = gen_exact_rows(gamma + 1, vocab);
  const std::vector<Row> probs_draft = gen_exact_rows(gamma, vocab);
  const StepResult step = enumerate_step(probs_target, probs_draft, method);
  Q expected = 0, reach = 1;
  for (int i = 0; i < gamma; ++i) {
    reach *= agreement(probs_target[i], probs_draft[i], method);
    RC_ASSERT(step.position_acceptance_marginal[i] == reach);
    expected += reach;
  }
  RC_ASSERT(step.expected_accepted == expected);
}

RC_GTEST_PROP(ExactMatch, CoupledAgreementLiesBetweenItsBoundAndOverlap, ()) {
  // (1 − TV)/(1 + TV) ≤ P[X = Y] ≤ 1 − TV: the lower bound of Daliri et al.; the upper one holds
  // for every coupling of p and q (V1's maximal coupling reaches it). Equal rows agree surely.
  const int vocab = *rc::gen::inRange(2, 6);
  const Row p = *testing::gen_exact_row(vocab), q = *testing::gen_exact_row(vocab);
  Q overlap = 0;
  for (int y = 0; y < vocab; ++y) overlap += std::min(p[y], q[y]);
  const Q a = coupled_agreement(p, q);
  RC_ASSERT(coupled_agreement_bound(p, q) <= a);
  RC_ASSERT(a <= overlap);
  RC_ASSERT(coupled_agreement(p, p) == 1);
  // sampled-match's Σ p·q is at most the overlap too (Σ p·q ≤ Σ min(p, q)·max ≤ Σ min(p, q)).
  RC_ASSERT(sampled_match_agreement(p, q) <= overlap);
}

TEST(ExactMatch, SpecTestVectorAgreements) {
  // q = (2/3, 1/3), p = (1/3, 2/3). coupled, y = 0: S = max(1, 1) + max(2, 1/2) = 3, so 1/3;
  // y = 1: S = max(1/2, 2) + max(1, 1) = 3, so 1/3; total 2/3. Bound: TV = 1/3, (2/3)/(4/3) = 1/2.
  // sampled-match: 2/9 + 2/9 = 4/9. V1: Σ min = 2/3 (coupled reaches it here: 2 tokens).
  const Row q = {Q(2, 3), Q(1, 3)}, p = {Q(1, 3), Q(2, 3)};
  EXPECT_EQ(coupled_agreement(p, q), Q(2, 3));
  EXPECT_EQ(coupled_agreement_bound(p, q), Q(1, 2));
  EXPECT_EQ(sampled_match_agreement(p, q), Q(4, 9));
  // Three tokens: p = (1/2, 1/2, 0), q = (1/2, 1/4, 1/4). y = 0: S = 1 + max(1, 1/2) + max(0, 1/2)
  // = 5/2 → 2/5; y = 1: S = max(1, 2) + 1 + max(0, 1) = 4 → 1/4; total 13/20 < Σ min = 3/4.
  const Row p3 = {Q(1, 2), Q(1, 2), Q(0)}, q3 = {Q(1, 2), Q(1, 4), Q(1, 4)};
  EXPECT_EQ(coupled_agreement(p3, q3), Q(13, 20));
}

RC_GTEST_PROP(ExactMatch, FloatAcceptancesMatchTheRationals, ()) {
  // coupled_acceptance sorts by q/p and sums prefix masses (O(V log V)); the rational formula
  // sums V terms per token. Rows of k/64 are exact in float.
  const int vocab = *rc::gen::inRange(2, 9);
  std::vector<int> wp = *rc::gen::container<std::vector<int>>(vocab, rc::gen::inRange(0, 5));
  std::vector<int> wq = *rc::gen::container<std::vector<int>>(vocab, rc::gen::inRange(0, 5));
  wp[0] += 1;  // not all zero
  wq[vocab - 1] += 1;
  const auto rows = [](const std::vector<int>& w, Row& exact_row, std::vector<float>& float_row) {
    int total = 0;
    for (int x : w) total += x;
    for (int x : w) {
      exact_row.push_back(Q(x) / total);
      float_row.push_back(static_cast<float>(static_cast<double>(x) / total));
    }
  };
  Row p, q;
  std::vector<float> pf, qf;
  rows(wp, p, pf);
  rows(wq, q, qf);
  // The float rows are the rationals rounded to float: agreement to 1e-6.
  RC_ASSERT(std::abs(coupled_acceptance(pf, qf) - coupled_agreement(p, q).convert_to<double>()) <
            1e-6);
  RC_ASSERT(std::abs(sampled_match_acceptance(pf, qf) -
                     sampled_match_agreement(p, q).convert_to<double>()) < 1e-6);
  RC_ASSERT(std::abs(coupled_acceptance_bound(pf, qf) -
                     coupled_agreement_bound(p, q).convert_to<double>()) < 1e-6);
}

}  // namespace
}  // namespace speclab::exact
