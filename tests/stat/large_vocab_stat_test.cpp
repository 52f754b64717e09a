// Block verification (docs/verifiers.md V5) and tree verification with i.i.d. candidates (V6) at V
// = 32000: the first emitted token's law is p_1 (docs/testing.md "Statistical checks"). Rows come
// from make_synthetic_batch (language-like, Σ min(p, q) ≈ 0.75 per position); every sample redraws
// the drafts and verifies at its own step, so uniforms never repeat. These are smoke checks of the
// default suite: 8-10k samples detect only ε ≈ 0.07 (printed), because a step costs ~1-2 ms in the
// references; the checks at ε = 0.01 (N = 300k, the first two tokens) are the nightly
// LargeVocabSlowStat (large_vocab_slow_test.cpp).
#include <gtest/gtest.h>

#include <algorithm>

#include "core/base/philox.hpp"
#include "core/base/rules.hpp"
#include "core/verify/synthetic_batch.hpp"
#include "core/verify/verify_block.hpp"
#include "core/verify/verify_tree.hpp"
#include "tests/support/large_vocab_rows.hpp"
#include "tests/support/stat_support.hpp"

namespace speclab {
namespace {

using testing::fits;
using testing::report_chi_square;
using testing::stat_seed;

// Two checks in this file share the 1e-6 budget.
const double kAlpha = bonferroni_level(testing::kStatSuiteFalseFailureRate, 2);
constexpr int64_t kVocab = testing::kLargeVocab, kGamma = testing::kLargeGamma;
using testing::Rows;

void check_first_token(const char* label, const std::vector<int64_t>& counts, const Rows& rows,
                       uint64_t seed) {
  const ChiSquareResult r = chi_square_test(counts, rows.p1);
  report_chi_square(label, r, kAlpha, seed);
  EXPECT_TRUE(fits(r, kAlpha, seed));
}

TEST(LargeVocabStat, BlockFirstTokenIsTarget) {
  const Rows rows(20261130);
  ChainBatchData batch = rows.data;
  const uint64_t seed = stat_seed("block");
  constexpr int64_t kSamples = 10000;  // the V5 reference reads every row: ~0.5 ms a sample
  std::vector<int64_t> counts(kVocab, 0);
  for (uint32_t s = 0; s < kSamples; ++s) {
    for (int64_t i = 0; i < kGamma; ++i) {
      batch.draft_tokens[i] = rows.draw(
          i, philox_bits({seed, 0, s, static_cast<uint32_t>(i + 1), Purpose::kDraftSample, 0}));
    }
    const ChainResult result = verify_block(batch.view(), {.seed = seed, .step = s});
    ++counts[result.emitted_tokens[0]];
  }
  check_first_token("block", counts, rows, seed);
}

TEST(LargeVocabStat, TreeIidFirstTokenIsTarget) {
  // Two i.i.d. candidates under the root and two under each of them: root (p_1, q_1), depth 1
  // (p_2, q_2), leaves (p_3; their q is never read).
  const Rows rows(20261131);
  const int64_t nodes = 6, width = nodes + 1;
  std::vector<float> probs_target(width * kVocab), probs_draft(width * kVocab);
  std::vector<int32_t> parents = {0, 0, 0, 1, 1, 2, 2}, tokens(width, 0);
  const int64_t depth_of[] = {0, 1, 1, 2, 2, 2, 2};
  for (int64_t n = 0; n < width; ++n) {
    std::copy_n(rows.target(depth_of[n]), kVocab, &probs_target[n * kVocab]);
    std::copy_n(rows.draft(std::min<int64_t>(depth_of[n], kGamma - 1)), kVocab,
                &probs_draft[n * kVocab]);
  }
  const uint64_t seed = stat_seed("tree-iid");
  constexpr int64_t kSamples = 8000;  // the V6 reference: ~1 ms a sample
  std::vector<int64_t> counts(kVocab, 0);
  for (uint32_t s = 0; s < kSamples; ++s) {
    for (int64_t n = 1; n < width; ++n) {
      tokens[n] =
          rows.draw(depth_of[n] - 1,
                    philox_bits({seed, 0, s, 1, Purpose::kDraftSample, static_cast<uint32_t>(n)}));
    }
    const TreeBatch batch{1, nodes, kVocab, probs_target, probs_draft, parents, tokens, {}, {}, {}};
    const TreeResult result =
        verify_tree(batch, {.method = TreeMethod::kIid, .seed = seed, .step = s});
    ++counts[result.emitted_tokens[0]];
  }
  check_first_token("tree-iid", counts, rows, seed);
}

}  // namespace
}  // namespace speclab
