// The multi-draft optimum (core/exact/lp_optimal.hpp, docs/verifiers.md "The multi-draft
// optimum") against closed forms derived here, against every lossless verifier's exact acceptance,
// and attained by the verifier its own optimal coupling defines. All in exact rationals.
#include "core/exact/lp_optimal.hpp"

#include <gtest/gtest.h>
#include <rapidcheck/gtest.h>

#include <algorithm>
#include <numeric>
#include <vector>

#include "core/base/error.hpp"
#include "core/exact/exact_tree.hpp"

namespace speclab::exact {
namespace {

// Integer weights 0..4, not all zero, normalised exactly.
rc::Gen<Row> gen_row(int vocab) {
  return rc::gen::map(
      rc::gen::suchThat(
          rc::gen::container<std::vector<int>>(vocab, rc::gen::inRange(0, 5)),
          [](const std::vector<int>& w) { return std::accumulate(w.begin(), w.end(), 0) > 0; }),
      [](const std::vector<int>& weights) {
        const int total = std::accumulate(weights.begin(), weights.end(), 0);
        Row row;
        for (int w : weights) row.push_back(Q(w) / total);
        return row;
      });
}

Q sum_min(const Row& p, const Row& q) {
  Q total = 0;
  for (size_t x = 0; x < p.size(); ++x) total += std::min(p[x], q[x]);
  return total;
}

Q power(const Q& base, int exponent) {
  Q result = 1;
  for (int i = 0; i < exponent; ++i) result *= base;
  return result;
}

// Max-flow min-cut on the bipartite graph drafts → targets (a drafted tuple x̄ may emit y only
// when y ∈ x̄): for any set H of targets, P(y ∈ x̄) ≤ P(y ∈ H) + P(y ∉ H, y ∈ x̄) ≤ p(H) +
// P(x̄ meets H^c) = p(H) + 1 − q(H)^k, and by the max-flow min-cut theorem the best H makes it an
// equality. Enumerates every H.
Q cut_bound(const Row& p, const Row& q, int k) {
  const int v = static_cast<int>(p.size());
  Q best = 2;
  for (uint32_t h = 0; h < (1u << v); ++h) {
    Q p_h = 0, q_h = 0;
    for (int x = 0; x < v; ++x) {
      if (h >> x & 1u) {
        p_h += p[x];
        q_h += q[x];
      }
    }
    best = std::min(best, Q(p_h + 1 - power(q_h, k)));
  }
  return best;
}

// Khisti et al. (ICLR 2025), two identical drafts: the optimal acceptance is
// min over S of Σ_{s∈S} p_s + (Σ_{s∉S} q_s)² + 2(Σ_{s∈S} q_s)(Σ_{s∉S} q_s).
Q khisti_two_drafts(const Row& p, const Row& q) {
  const int v = static_cast<int>(p.size());
  Q best = 2;
  for (uint32_t s = 0; s < (1u << v); ++s) {
    Q p_in = 0, q_in = 0, q_out = 0;
    for (int x = 0; x < v; ++x) {
      if (s >> x & 1u) {
        p_in += p[x];
        q_in += q[x];
      } else {
        q_out += q[x];
      }
    }
    best = std::min(best, Q(p_in + q_out * q_out + 2 * q_in * q_out));
  }
  return best;
}

// The verifier of an optimal coupling: for drafted tuple x̄ with distinct set S, emit y ∈ S with
// probability flow[S][y]/P(S), otherwise y from the leftover p − Σ_S flow[S][·], normalised.
// Returns its exact output law and P(emitted ∈ x̄), over all V^k tuples.
struct VerifierLaw {
  Row output;
  Q hit;
};
VerifierLaw coupling_verifier(const Row& p, const Row& q, int k, const MultiDraftOptimum& opt) {
  const int v = static_cast<int>(p.size());
  Row leftover = p;
  for (const auto& [set, row] : opt.flow) {
    for (int y = 0; y < v; ++y) leftover[y] -= row[y];
  }
  Q leftover_mass = 0;
  for (const Q& r : leftover) {
    RC_ASSERT(r >= 0);
    leftover_mass += r;
  }
  VerifierLaw law{Row(v), 0};
  std::vector<int> tuple(k, 0);
  for (;;) {
    Q probability = 1;
    uint32_t set = 0;
    for (int x : tuple) {
      probability *= q[x];
      set |= 1u << x;
    }
    if (probability > 0) {
      const Q set_probability = opt.set_probability.at(set);
      const Row& row = opt.flow.at(set);
      Q emitted_from_drafts = 0;
      for (int y = 0; y < v; ++y) {
        const Q share = probability * row[y] / set_probability;
        law.output[y] += share;
        emitted_from_drafts += row[y] / set_probability;
        if (set >> y & 1u) law.hit += share;
      }
      const Q miss = 1 - emitted_from_drafts;
      RC_ASSERT(miss >= 0);
      if (miss > 0) {
        RC_ASSERT(leftover_mass > 0);
        for (int y = 0; y < v; ++y) {
          const Q share = probability * miss * leftover[y] / leftover_mass;
          law.output[y] += share;
          if (set >> y & 1u) law.hit += share;
        }
      }
    }
    int i = 0;
    while (i < k && ++tuple[i] == v) tuple[i++] = 0;
    if (i == k) break;
  }
  return law;
}

Q accepted_at_gamma_one(const Row& p, const Row& q, int k, TreeMethod method) {
  return enumerate_tree_step({p, p}, {q}, method, k).expected_accepted;
}

RC_GTEST_PROP(LpOptimal, OneDraftIsSumMin, ()) {
  const int v = *rc::gen::inRange(1, kLpMaxVocab + 1);
  const Row p = *gen_row(v), q = *gen_row(v);
  RC_ASSERT(multidraft_optimum(p, q, 1).acceptance == sum_min(p, q));
}

RC_GTEST_PROP(LpOptimal, EqualsTheMinCutClosedForm, ()) {
  const int v = *rc::gen::inRange(2, 6);
  const int k = *rc::gen::inRange(1, 4);
  const Row p = *gen_row(v), q = *gen_row(v);
  RC_ASSERT(multidraft_optimum(p, q, k).acceptance == cut_bound(p, q, k));
}

RC_GTEST_PROP(LpOptimal, TwoDraftsEqualKhistisClosedForm, ()) {
  const int v = *rc::gen::inRange(2, 7);
  const Row p = *gen_row(v), q = *gen_row(v);
  RC_ASSERT(multidraft_optimum(p, q, 2).acceptance == khisti_two_drafts(p, q));
}

RC_GTEST_PROP(LpOptimal, BoundsEveryLosslessVerifier, ()) {
  const int v = *rc::gen::inRange(2, 5);
  const int k = *rc::gen::inRange(1, 4);
  const Row p = *gen_row(v), q = *gen_row(v);
  const Q bound = multidraft_optimum(p, q, k).acceptance;
  RC_ASSERT(accepted_at_gamma_one(p, q, k, TreeMethod::kIid) <= bound);
  RC_ASSERT(accepted_at_gamma_one(p, q, k, TreeMethod::kKseq) <= bound);
  if (k == 1) {
    // V1 token verification attains Σ min(p, q), the optimum for one draft; V5 at γ = 1 is V1.
    RC_ASSERT(enumerate_step({p, p}, {q}, Method{}).expected_accepted == bound);
    RC_ASSERT(enumerate_step({p, p}, {q}, BlockMethod{}).expected_accepted == bound);
  }
}

// Khisti et al. show the optimum is attained (the LP's optimal coupling is a verifier): the
// coupling the solver returns, completed with the leftovers, is lossless and reaches the optimum;
// were the LP's value below the true optimum, or its flow infeasible, this would fail.
RC_GTEST_PROP(LpOptimal, ItsCouplingIsALosslessVerifierThatAttainsIt, ()) {
  const int v = *rc::gen::inRange(2, 6);
  const int k = *rc::gen::inRange(1, 4);
  const Row p = *gen_row(v), q = *gen_row(v);
  const MultiDraftOptimum opt = multidraft_optimum(p, q, k);
  const VerifierLaw law = coupling_verifier(p, q, k, opt);
  RC_ASSERT(law.output == p);
  RC_ASSERT(law.hit == opt.acceptance);
}

TEST(LpOptimal, SimplexSolvesATextbookProgram) {
  // max 3x + 5y s.t. x ≤ 4, 2y ≤ 12, 3x + 2y ≤ 18: the vertex (2, 6) with value 36 (the corner
  // where 2y = 12 and 3x + 2y = 18 meet; the other corners (0,0), (4,0), (4,3), (0,6) give 0, 12,
  // 27, 30).
  const LinearProgram program{{{1, 0}, {0, 2}, {3, 2}}, {4, 12, 18}, {3, 5}};
  const LpSolution solution = maximize(program);
  EXPECT_EQ(solution.value, 36);
  EXPECT_EQ(solution.x, (Row{2, 6}));
}

TEST(LpOptimal, IdenticalRowsAcceptAlways) {
  const Row p{Q(1, 2), Q(1, 3), Q(1, 6)};
  for (int k = 1; k <= kLpMaxDrafts; ++k) EXPECT_EQ(multidraft_optimum(p, p, k).acceptance, 1);
}

TEST(LpOptimal, LargestInstanceSolves) {
  // V = kLpMaxVocab, k = kLpMaxDrafts: the sizes the header promises.
  Row p, q;
  for (int x = 0; x < kLpMaxVocab; ++x) {
    p.push_back(Q(x + 1, kLpMaxVocab * (kLpMaxVocab + 1) / 2));
    q.push_back(Q(kLpMaxVocab - x, kLpMaxVocab * (kLpMaxVocab + 1) / 2));
  }
  const MultiDraftOptimum opt = multidraft_optimum(p, q, kLpMaxDrafts);
  EXPECT_EQ(opt.variables, 512);
  EXPECT_EQ(opt.constraints, 8 + 28 + 56 + 70 + kLpMaxVocab);  // sets of 1..4 tokens, tokens
  EXPECT_EQ(opt.acceptance, cut_bound(p, q, kLpMaxDrafts));
}

TEST(LpOptimal, SizesOutsideTheLimitsAreRefused) {
  const Row two{Q(1, 2), Q(1, 2)};
  const Row nine(9, Q(1, 9));
  EXPECT_THROW(multidraft_optimum(nine, nine, 1), InvalidInput);
  EXPECT_THROW(multidraft_optimum(two, two, 0), InvalidInput);
  EXPECT_THROW(multidraft_optimum(two, two, kLpMaxDrafts + 1), InvalidInput);
  EXPECT_THROW(multidraft_optimum(two, Row{Q(1, 2), Q(1, 3)}, 1), InvalidInput);
  EXPECT_THROW(multidraft_optimum(two, Row{Q(1)}, 1), InvalidInput);
}

}  // namespace
}  // namespace speclab::exact
