// Statistical layer of tree verification (docs/verifiers.md V6; docs/testing.md "Statistical
// checks"): complete draft trees of depth 2 whose candidates are drawn by each declared law from
// Philox draft-sample uniforms, verified by verify_tree, against the exact laws of
// core/exact/exact_tree.hpp — the joint emitted sequence of one step for every method (binary
// trees over V = 3 with rows by depth; ternary trees over V = 5 with rows by the node's token), and
// the lossy variant's first token detectably away from the target. Traversal (V7) draws its
// candidates without replacement, like tree-swor.
#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "core/exact/exact_tree.hpp"
#include "core/stats/stats.hpp"
#include "core/verify/verify_tree.hpp"
#include "tests/support/stat_support.hpp"
#include "tests/support/tree_fixture.hpp"

namespace speclab {
namespace {

using exact::Q;
using testing::fits;
using testing::OwnedTreeBatch;
using testing::stat_seed;

// One χ² per method and instance (2 × 6) share the 1e-6 budget; the positive control below is not
// a risk of false failure (see there).
constexpr int64_t kChecks = 12;
const double kAlpha = bonferroni_level(testing::kStatSuiteFalseFailureRate, kChecks);
constexpr int64_t kBatch = 2048, kVocab = 3, kDepth = 2, kBranches = 2;

// Rows per depth as integer weights with power-of-two totals (exact in float). Depth 0 and 1 draft
// rows have support ≥ 2, so two draws without replacement are possible; the depth-2 draft row is
// never read (leaves).
const std::vector<std::vector<int>> kTargetW{{4, 2, 2}, {0, 3, 5}, {6, 1, 1}};
const std::vector<std::vector<int>> kDraftW{{1, 5, 2}, {2, 2, 4}, {1, 1, 2}};

std::vector<float> float_row(const std::vector<int>& w) {
  double total = 0;
  for (int x : w) total += x;
  std::vector<float> row;
  for (int x : w) row.push_back(static_cast<float>(x / total));
  return row;
}

exact::Row exact_row(const std::vector<int>& w) {
  Q total = 0;
  for (int x : w) total += x;
  exact::Row row;
  for (int x : w) row.push_back(Q(x) / total);
  return row;
}

exact::StepResult exact_law(TreeMethod method) {
  std::vector<exact::Row> target, draft;
  for (int d = 0; d <= kDepth; ++d) target.push_back(exact_row(kTargetW[d]));
  for (int d = 0; d < kDepth; ++d) draft.push_back(exact_row(kDraftW[d]));
  return exact::enumerate_tree_step(target, draft, method, kBranches);
}

int64_t category(const int32_t* tokens, int len) {
  int64_t offset = 0, power = 1, code = 0;
  for (int l = 1; l < len; ++l) offset += power *= kVocab;
  for (int k = len - 1; k >= 0; --k) code = code * kVocab + tokens[k];
  return offset + code;
}

constexpr int64_t kCategories = 3 + 9 + 27;

std::vector<double> category_probs(const exact::Distribution& dist) {
  std::vector<double> probs(kCategories, 0.0);
  for (const auto& [seq, p] : dist) {
    const std::vector<int32_t> t(seq.begin(), seq.end());
    probs[category(t.data(), static_cast<int>(t.size()))] = p.convert_to<double>();
  }
  return probs;
}

struct TreeSamples {
  std::vector<int64_t> sequences = std::vector<int64_t>(kCategories, 0);
  std::vector<int64_t> first_tokens = std::vector<int64_t>(kVocab, 0);
};

// N trees: tree s is request id s; its candidates use (seed; s, 0, node, kDraftSample, sibling).
TreeSamples sample_trees(TreeMethod method, uint64_t seed, int64_t n_samples) {
  std::vector<std::vector<float>> targets, drafts;
  for (int d = 0; d <= kDepth; ++d) {
    targets.push_back(float_row(kTargetW[d]));
    drafts.push_back(float_row(kDraftW[d]));
  }
  const int64_t nodes = testing::kary_nodes(kBranches, kDepth);
  OwnedTreeBatch batch(kBatch, nodes, kVocab);
  batch.request_ids.resize(kBatch);
  TreeSamples out;
  for (int64_t start = 0; start < n_samples; start += kBatch) {
    for (int64_t r = 0; r < kBatch; ++r) {
      const auto id = static_cast<uint32_t>(start + r);
      batch.request_ids[r] = id;
      testing::fill_kary_tree(
          batch, r, method, kBranches, kDepth, targets, drafts,
          [](int32_t, int64_t depth) { return depth; }, seed, id, 0);
    }
    const TreeResult res = verify_tree(batch.view(), {.method = method, .seed = seed});
    for (int64_t r = 0; r < kBatch; ++r) {
      const int32_t* emitted = &res.emitted_tokens[r * (nodes + 1)];
      ++out.sequences[category(emitted, res.n_emitted(r))];
      ++out.first_tokens[emitted[0]];
    }
  }
  return out;
}

// N = 200k per method over ≤ 39 categories detects ε ≈ 0.011 (printed).
class VerifyTreeStat : public ::testing::TestWithParam<TreeMethod> {};

TEST_P(VerifyTreeStat, JointMatchesExact) {
  const TreeMethod method = GetParam();
  const uint64_t seed = stat_seed(to_string(method));
  const exact::StepResult law = exact_law(method);
  const TreeSamples s = sample_trees(method, seed, 200'704);  // 98 batches of 2048
  const ChiSquareResult r = chi_square_test(s.sequences, category_probs(law.distribution));
  testing::report_chi_square(std::string(to_string(method)), r, kAlpha, seed);
  EXPECT_TRUE(fits(r, kAlpha, seed)) << to_string(method);
}

INSTANTIATE_TEST_SUITE_P(Methods, VerifyTreeStat,
                         ::testing::Values(TreeMethod::kIid, TreeMethod::kSwor, TreeMethod::kTopk,
                                           TreeMethod::kTopkSoftmaxQ, TreeMethod::kKseq,
                                           TreeMethod::kTraversal),
                         [](const auto& info) {
                           std::string name(to_string(info.param));
                           for (char& c : name) c = c == '-' ? '_' : c;
                           return name;
                         });

// V = 5, K = 3 candidates per node, depth 2 (1 + 3 + 9 nodes), rows chosen by the node's token
// (a Markov pair, totals 16, exact in float), so every node of a tree has its own p and q and a
// bug that reads the wrong node's row, or mixes up q⁽ʲ⁾ of later siblings (without replacement:
// q on the tokens not drawn yet, renormalised), changes the law. Every draft row has support ≥ 3
// for three draws without replacement. The root follows token 0.
const std::vector<std::vector<int>> kTargetByToken{
    {5, 4, 3, 2, 2}, {0, 6, 4, 4, 2}, {3, 3, 0, 6, 4}, {6, 2, 4, 0, 4}, {2, 5, 3, 6, 0}};
const std::vector<std::vector<int>> kDraftByToken{
    {2, 6, 2, 4, 2}, {4, 2, 6, 2, 2}, {6, 4, 2, 2, 2}, {2, 2, 2, 4, 6}, {4, 4, 4, 2, 2}};
constexpr int kWideVocab = 5, kWideBranches = 3, kWideStart = 0;
constexpr int64_t kWideCategories = 5 + 25 + 125;

int64_t wide_category(const int32_t* tokens, int len) {
  int64_t offset = 0, power = 1, code = 0;
  for (int l = 1; l < len; ++l) offset += power *= kWideVocab;
  for (int k = len - 1; k >= 0; --k) code = code * kWideVocab + tokens[k];
  return offset + code;
}

// The exact law of one step by exact::tree_law with rows that depend on the token before a node.
std::vector<double> wide_exact_probs(TreeMethod method) {
  std::vector<exact::Row> target, draft;
  for (int t = 0; t < kWideVocab; ++t) {
    target.push_back(exact_row(kTargetByToken[t]));
    draft.push_back(exact_row(kDraftByToken[t]));
  }
  const exact::RowAt target_at = [&](int, int before) -> const exact::Row& {
    return target[before];
  };
  const exact::RowAt draft_at = [&](int, int before) -> const exact::Row& { return draft[before]; };
  std::vector<exact::Q> probs(kWideCategories, exact::Q(0));
  exact::tree_law(method, kWideBranches)(
      target_at, draft_at, kDepth, kWideStart,
      [&](const exact::Sequence& emitted, int, const exact::Q& probability) {
        const std::vector<int32_t> t(emitted.begin(), emitted.end());
        probs[wide_category(t.data(), static_cast<int>(t.size()))] += probability;
      });
  exact::Q total = 0;
  for (const exact::Q& x : probs) total += x;
  EXPECT_EQ(total, 1);
  std::vector<double> out;
  for (const exact::Q& x : probs) out.push_back(x.convert_to<double>());
  return out;
}

std::vector<int64_t> sample_wide_trees(TreeMethod method, uint64_t seed, int64_t n_samples) {
  std::vector<std::vector<float>> targets, drafts;
  for (int t = 0; t < kWideVocab; ++t) {
    targets.push_back(float_row(kTargetByToken[t]));
    drafts.push_back(float_row(kDraftByToken[t]));
  }
  const int64_t nodes = testing::kary_nodes(kWideBranches, kDepth);
  OwnedTreeBatch batch(kBatch, nodes, kWideVocab);
  batch.request_ids.resize(kBatch);
  std::vector<int64_t> counts(kWideCategories, 0);
  for (int64_t start = 0; start < n_samples; start += kBatch) {
    for (int64_t r = 0; r < kBatch; ++r) {
      const auto id = static_cast<uint32_t>(start + r);
      batch.request_ids[r] = id;
      testing::fill_kary_tree(
          batch, r, method, kWideBranches, kDepth, targets, drafts,
          [](int32_t token, int64_t) { return token < 0 ? kWideStart : token; }, seed, id, 0);
    }
    const TreeResult res = verify_tree(batch.view(), {.method = method, .seed = seed});
    for (int64_t r = 0; r < kBatch; ++r) {
      ++counts[wide_category(&res.emitted_tokens[r * (nodes + 1)], res.n_emitted(r))];
    }
  }
  return counts;
}

// N = 200k per method over the ≤ 155 categories (5 + 25 + 125) detects ε ≈ 0.015 (printed).
TEST_P(VerifyTreeStat, ContextDependentTernaryJointMatchesExact) {
  const TreeMethod method = GetParam();
  const uint64_t seed = stat_seed(to_string(method));
  const std::vector<double> probs = wide_exact_probs(method);
  const std::vector<int64_t> counts = sample_wide_trees(method, seed, 200'704);
  const ChiSquareResult r = chi_square_test(counts, probs);
  testing::report_chi_square(std::string(to_string(method)) + "_v5k3", r, kAlpha, seed);
  EXPECT_TRUE(fits(r, kAlpha, seed)) << to_string(method);
}

// The positive control: the softmax-q variant's first-token law differs from p_1 (exactly, by the
// enumeration) and 200k samples show it against p_1. The TV distance is printed; a failure to
// reject at this N would need a χ² far below its mean, so this assertion takes no share of the
// false-failure budget.
TEST(VerifyTreeStatControl, SoftmaxQFirstTokenIsNotTarget) {
  const exact::StepResult law = exact_law(TreeMethod::kTopkSoftmaxQ);
  const exact::Row p1 = exact_row(kTargetW[0]);
  ASSERT_NE(law.first_token_marginal, p1);
  Q tv = 0;
  for (int a = 0; a < kVocab; ++a) tv += abs(Q(law.first_token_marginal[a] - p1[a]));
  std::cout << "[stat] softmax-q first-token TV from p_1 = " << (tv / 2).convert_to<double>()
            << std::endl;
  const uint64_t seed = stat_seed("control");
  const TreeSamples s = sample_trees(TreeMethod::kTopkSoftmaxQ, seed, 200'704);
  std::vector<double> target;
  for (const Q& x : p1) target.push_back(x.convert_to<double>());
  const ChiSquareResult r = chi_square_test(s.first_tokens, target);
  testing::report_chi_square("vs_target_p1", r, kAlpha, seed);
  EXPECT_LT(r.p_value, kAlpha) << "the lossy variant should be detectably different from p_1";
}

}  // namespace
}  // namespace speclab
