// The bytes `speclab bench gpu` counts per request for each device path (experiments/
// bench_gpu_bytes.hpp) against gpu/README.md's tables, worked by hand at γ_b = 5, V = 1000.
#include "bench/bench_gpu_bytes.hpp"

#include <gtest/gtest.h>

namespace speclab::cli {
namespace {

constexpr int64_t kGamma = 5, kVocab = 1000;

TEST(BenchGpuBytes, ProbabilityVerifiersMatchTheReadmeTables) {
  // V1/V3: 4γ tokens, 64 B per tested position, then the residual's p and q or the bonus row.
  EXPECT_DOUBLE_EQ(chain_probs_bytes(kGamma, kVocab, 0), 20 + 64 + 8000);
  EXPECT_DOUBLE_EQ(chain_probs_bytes(kGamma, kVocab, 2), 20 + 3 * 64 + 8000);
  EXPECT_DOUBLE_EQ(chain_probs_bytes(kGamma, kVocab, 5), 20 + 5 * 64 + 4000);
  // V2: one 4V argmax pass per row up to and including the first mismatch (or the bonus row).
  EXPECT_DOUBLE_EQ(greedy_probs_bytes(kGamma, kVocab, 2), 20 + 3 * 4000);
  EXPECT_DOUBLE_EQ(greedy_probs_bytes(kGamma, kVocab, 5), 20 + 6 * 4000);
  // V5: all γ gathers, then the bonus row, 8V per Z row γ_b−1 … τ, or 8V·γ_b at τ = 0.
  EXPECT_DOUBLE_EQ(block_probs_bytes(kGamma, kVocab, 5), 20 + 320 + 4000);
  EXPECT_DOUBLE_EQ(block_probs_bytes(kGamma, kVocab, 2), 20 + 320 + 3 * 8000);
  EXPECT_DOUBLE_EQ(block_probs_bytes(kGamma, kVocab, 0), 20 + 320 + 5 * 8000);
}

TEST(BenchGpuBytes, FusedVerifiersMatchTheReadmeTable) {
  // bf16 logits: sV = 2000 bytes per row.
  // V1/V3: passes A and B of p_i and q_i per tested position (4sV), then 2sV or 3sV.
  EXPECT_DOUBLE_EQ(chain_logits_bytes(kGamma, kVocab, 2, 0), 20 + 8000 + 4000);
  EXPECT_DOUBLE_EQ(chain_logits_bytes(kGamma, kVocab, 2, 2), 20 + 3 * 8000 + 4000);
  EXPECT_DOUBLE_EQ(chain_logits_bytes(kGamma, kVocab, 2, 5), 20 + 5 * 8000 + 6000);
  // V2: pass A per row.
  EXPECT_DOUBLE_EQ(greedy_logits_bytes(kGamma, kVocab, 2, 2), 20 + 3 * 2000);
  // V5: every pair reduced (4sV·γ_b), then the bonus row (3sV) or 2sV per Z row.
  EXPECT_DOUBLE_EQ(block_logits_bytes(kGamma, kVocab, 2, 5), 20 + 5 * 8000 + 6000);
  EXPECT_DOUBLE_EQ(block_logits_bytes(kGamma, kVocab, 2, 2), 20 + 5 * 8000 + 3 * 4000);
  EXPECT_DOUBLE_EQ(block_logits_bytes(kGamma, kVocab, 2, 0), 20 + 5 * 8000 + 5 * 4000);
}

TEST(BenchGpuBytes, SplitAndRowsParallelPathsMatchTheReadmeTables) {
  // V5 split: the bonus row alone when the first test passes, else all γ_b Z rows (8V each).
  EXPECT_DOUBLE_EQ(block_probs_split_bytes(kGamma, kVocab, 5), 20 + 320 + 4000);
  EXPECT_DOUBLE_EQ(block_probs_split_bytes(kGamma, kVocab, 2), 20 + 320 + 5 * 8000);
  EXPECT_DOUBLE_EQ(block_probs_split_bytes(kGamma, kVocab, 0),
                   block_probs_bytes(kGamma, kVocab, 0));
  // bf16 logits (sV = 2000), rows in parallel: passes A and B of all 2γ_b + 1 = 11 rows (2sV
  // each), then the residual (2sV) or the bonus sampling pass (sV).
  EXPECT_DOUBLE_EQ(chain_logits_rows_bytes(kGamma, kVocab, 2, 0), 20 + 11 * 4000 + 4000);
  EXPECT_DOUBLE_EQ(chain_logits_rows_bytes(kGamma, kVocab, 2, 5), 20 + 11 * 4000 + 2000);
  EXPECT_DOUBLE_EQ(chain_logits_rows_bytes(kGamma, kVocab, 2, 4),
                   chain_logits_bytes(kGamma, kVocab, 2, 4) + 4000)
      << "one rejection at the last position: only the bonus row's passes are extra";
  // V2: pass A of every target row.
  EXPECT_DOUBLE_EQ(greedy_logits_rows_bytes(kGamma, kVocab, 2), 20 + 6 * 2000);
  EXPECT_DOUBLE_EQ(greedy_logits_rows_bytes(kGamma, kVocab, 2),
                   greedy_logits_bytes(kGamma, kVocab, 2, kGamma));
  // V5: every pair and the bonus row's statistics, then 2sV per Z row or the bonus pass.
  EXPECT_DOUBLE_EQ(block_logits_rows_bytes(kGamma, kVocab, 2, 5), 20 + 11 * 4000 + 2000);
  EXPECT_DOUBLE_EQ(block_logits_rows_bytes(kGamma, kVocab, 2, 5),
                   block_logits_bytes(kGamma, kVocab, 2, 5));
  EXPECT_DOUBLE_EQ(block_logits_rows_bytes(kGamma, kVocab, 2, 2), 20 + 11 * 4000 + 3 * 4000);
  EXPECT_DOUBLE_EQ(block_logits_rows_bytes(kGamma, kVocab, 2, 0), 20 + 11 * 4000 + 5 * 4000);
}

TEST(BenchGpuBytes, RowBytesScaleWithTheLogitWidth) {
  for (int64_t n = 0; n <= kGamma; ++n) {
    // V2 reads one 4V row per position whether it holds fp32 logits or probabilities.
    EXPECT_DOUBLE_EQ(greedy_logits_bytes(kGamma, kVocab, 4, n),
                     greedy_probs_bytes(kGamma, kVocab, n))
        << "n " << n;
    // Everything but the 4γ_b token bytes halves from fp32 to bf16 logits.
    EXPECT_DOUBLE_EQ(chain_logits_bytes(kGamma, kVocab, 4, n) - 4 * kGamma,
                     2 * (chain_logits_bytes(kGamma, kVocab, 2, n) - 4 * kGamma))
        << "n " << n;
    EXPECT_DOUBLE_EQ(block_logits_bytes(kGamma, kVocab, 4, n) - 4 * kGamma,
                     2 * (block_logits_bytes(kGamma, kVocab, 2, n) - 4 * kGamma))
        << "n " << n;
  }
}

TEST(BenchGpuBytes, SoftmaxReadsTheLogitsAndWritesFp32Probabilities) {
  EXPECT_DOUBLE_EQ(probs_from_logits_bytes(2 * kGamma + 1, kVocab, 4), 11 * 8000);
  EXPECT_DOUBLE_EQ(probs_from_logits_bytes(kGamma + 1, kVocab, 2), 6 * 6000);
}

}  // namespace
}  // namespace speclab::cli
