// The softmax fused into the logits verifiers (gpu/sampling/fused_logits.cuh) against core: the facts
// about exp_nonpositive its V2 relies on, and every probability and V2 token it computes (written
// out by gpu::fused_logits_rows) bitwise core::probs_from_logits' and argmax_lowest's. Built for
// the device (label gpu) and for the SIMT emulation (gpu-emu).
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>
#include <span>
#include <string>
#include <vector>

#include "core/base/error.hpp"
#include "core/sampling/sampling.hpp"
#include "core/verify/verify_block.hpp"
#include "core/verify/verify_chain.hpp"
#include "gpu/sampling/logits.hpp"
#include "gpu/verify/verify_block.hpp"
#include "gpu/verify/verify_chain.hpp"
#include "tests/gpu/gpu_test_util.hpp"
#include "tests/gpu/logits_case.hpp"
#include "tests/gpu/verify_chain_harness.hpp"

namespace speclab {
namespace {

using gpu::LogitsFormat;
using testing::bits_of;
using testing::DeviceBuffer;
using testing::DeviceCase;
using testing::DeviceLogitsBuffers;
using testing::float_of;
using testing::kAllRows;
using testing::kFormats;
using testing::kInf;
using testing::LogitRow;
using testing::LogitsCase;
using testing::name;
using testing::OwnedChainBatch;
using testing::random_logit_row;

TEST(FusedLogits, ExpNonpositiveFactsForGreedy) {
  // The facts gpu/sampling/fused_logits.cuh's V2 relies on, over every float where they are not obvious:
  // (1) exp_nonpositive(x) ≤ 1 for x ≤ 0 (and = 1 at 0); (3) exp_nonpositive(x) < 1 for
  // x < -2^-22. Every float in [-2^-16, -2^-32] is checked. For x in (-2^-32, 0] the reduction
  // gives r = x and poly·r² is below half an ulp of r, so 1 + r rounds to 1: fact (1) with
  // equality. Below -2^-16, exp(x) < 1 - 2^-17 while the polynomial is within 2^-22 relatively:
  // every 61st float there is checked, down to -1, and below -1 the result is under 0.75.
  EXPECT_EQ(gpu::exp_nonpositive(0.0f), 1.0f);
  EXPECT_EQ(gpu::exp_nonpositive(-0.0f), 1.0f);
  const uint32_t near_zero = bits_of(-0x1p-32f), edge = bits_of(-0x1p-16f);
  const uint32_t minus_one = bits_of(-1.0f), gap = bits_of(-0x1p-22f);
  int64_t above_one = 0, tie_below_gap = 0, checked = 0;
  for (uint32_t b = near_zero; b <= minus_one; b += b < edge ? 1 : 61) {  // |x| grows with b
    const float e = gpu::exp_nonpositive(float_of(b));
    above_one += e > 1.0f;
    tie_below_gap += b > gap && e >= 1.0f;
    ++checked;
  }
  EXPECT_GT(checked, 16 * (int64_t{1} << 23));
  EXPECT_EQ(above_one, 0);
  EXPECT_EQ(tie_below_gap, 0);
  for (float x = -1.0f; x > -100.0f; x -= 0.0078125f) ASSERT_LT(gpu::exp_nonpositive(x), 0.75f);
  EXPECT_EQ(gpu::exp_nonpositive(-kInf), 0.0f);
  // (2): e < 1 gives float(e·norm) < norm for every normal norm in [2^-31, 1]; the worst e is
  // the float below 1, checked on a dense sample of norms.
  const float below_one = std::nextafter(1.0f, 0.0f);
  std::mt19937 rng(3);
  std::uniform_int_distribution<uint32_t> norm_bits(bits_of(0x1p-31f), bits_of(1.0f));
  for (int k = 0; k < 1000000; ++k) {
    const float norm = float_of(norm_bits(rng));
    ASSERT_LT(below_one * norm, norm) << norm;
  }
}

TEST(FusedLogits, GpuMatchesReference) {
  SPECLAB_SKIP_WITHOUT_GPU();
  // The verifiers' p(t) (row statistics + LogitsProbRow) written out by the test hook: every
  // probability bitwise core::probs_from_logits', and the V2 token core's argmax_lowest of those
  // probabilities (near-tie rows included, where it differs from the logits' argmax).
  uint64_t seed = 400;
  int64_t logit_argmax_differs = 0;
  for (const LogitsFormat format : kFormats) {
    for (const int64_t vocab : {1, 5, 16, 17, 100, 2049, 4099, 32000}) {
      for (const double temperature : {0.0, 0.5, 1.0, 2.0}) {
        const int64_t rows = vocab >= 32000 ? 2 : 6;
        LogitsCase c(seed++, rows, 0, vocab, format, temperature, temperature, kAllRows, false,
                     false);
        if (vocab >= 32000) {  // one near-tie row among the two
          std::mt19937_64 rng(seed);
          random_logit_row(rng, c.target.values.data(), vocab, LogitRow::kNearTie, false);
          c.target.bits16.clear();
          c.target.encode();
          c.refresh_probs();
        }
        const DeviceLogitsBuffers device(c.target);
        DeviceBuffer<float> probs(rows * vocab);
        DeviceBuffer<int32_t> greedy(rows);
        DeviceBuffer<uint32_t> status(rows);
        ASSERT_EQ(gpu::fused_logits_rows(device.view(), rows, vocab, probs.span(), greedy.span(),
                                         status.span(), nullptr),
                  cudaSuccess);
        std::vector<float> gpu_probs;
        std::vector<int32_t> gpu_greedy;
        std::vector<uint32_t> gpu_status;
        ASSERT_EQ(probs.copy_to(gpu_probs), cudaSuccess);
        ASSERT_EQ(greedy.copy_to(gpu_greedy), cudaSuccess);
        ASSERT_EQ(status.copy_to(gpu_status), cudaSuccess);
        int64_t mismatches = 0;
        std::string first;
        for (int64_t r = 0; r < rows; ++r) {
          const std::span<const float> ref(&c.probs.probs_target[r * vocab], vocab);
          const std::span<const float> logits(&c.target.values[r * vocab], vocab);
          ASSERT_EQ(gpu_status[r], 0u) << "row " << r;
          EXPECT_EQ(gpu_greedy[r], argmax_lowest(ref))
              << name(format) << " V=" << vocab << " T=" << temperature << " row " << r;
          logit_argmax_differs += argmax_lowest(ref) != argmax_lowest(logits);
          for (int64_t t = 0; t < vocab; ++t) {
            if (bits_of(gpu_probs[r * vocab + t]) != bits_of(ref[t]) && mismatches++ == 0) {
              first = "row " + std::to_string(r) + " token " + std::to_string(t);
            }
          }
        }
        EXPECT_EQ(mismatches, 0) << name(format) << " V=" << vocab << " T=" << temperature
                                 << ", first at " << first;
      }
    }
  }
  EXPECT_GT(logit_argmax_differs, 0) << "near-tie rows must exercise the exact V2 pass";
}

}  // namespace
}  // namespace speclab
