// gpu::synthetic_logits, the benchmark's input generator: a draft row [B, γ, V] sits on its own
// target row [B, γ+1, V] (row (b, i) on (b, i), never on the bonus row), the same seed gives the
// same values and another seed others, and the values are finite with roughly the asked scale.
// Built for the device (label gpu) and for the SIMT emulation (gpu-emu).
#include "gpu/synthetic_logits.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "core/error.hpp"
#include "tests/gpu/gpu_test_util.hpp"
#include "tests/gpu/verify_chain_harness.hpp"

namespace speclab {
namespace {

using testing::DeviceBuffer;

std::vector<float> generate(uint64_t seed, int64_t rows, int64_t vocab, float scale,
                            const float* base = nullptr, int64_t group = 1, int64_t stride = 1) {
  DeviceBuffer<float> out(rows * vocab);
  gpu::SyntheticLogitsArgs a{.seed = seed,
                             .rows = rows,
                             .vocab = vocab,
                             .scale = scale,
                             .base = base,
                             .group = group,
                             .base_group_stride = stride,
                             .out = out.span().data()};
  EXPECT_EQ(gpu::synthetic_logits(a, nullptr), cudaSuccess);
  std::vector<float> host;
  EXPECT_EQ(out.copy_to(host), cudaSuccess);
  return host;
}

TEST(SyntheticLogits, DraftRowsSitOnTheirTargetRows) {
  SPECLAB_SKIP_WITHOUT_GPU();
  const int64_t batch = 3, gamma = 4, vocab = 37;
  const std::vector<float> target = generate(1, batch * (gamma + 1), vocab, 2.5f);
  DeviceBuffer<float> d_target(target);
  // Scale 0: the draft is exactly its base row.
  const std::vector<float> draft =
      generate(2, batch * gamma, vocab, 0.0f, d_target.const_span().data(), gamma, gamma + 1);
  for (int64_t b = 0; b < batch; ++b) {
    for (int64_t i = 0; i < gamma; ++i) {
      for (int64_t t = 0; t < vocab; ++t) {
        ASSERT_EQ(draft[(b * gamma + i) * vocab + t], target[(b * (gamma + 1) + i) * vocab + t])
            << "b " << b << " i " << i << " t " << t;
      }
    }
  }
}

TEST(SyntheticLogits, SeededFiniteAndScaled) {
  SPECLAB_SKIP_WITHOUT_GPU();
  const int64_t rows = 4, vocab = 2500;
  const std::vector<float> a = generate(7, rows, vocab, 2.0f);
  EXPECT_EQ(generate(7, rows, vocab, 2.0f), a);
  EXPECT_NE(generate(8, rows, vocab, 2.0f), a);
  double sum = 0.0, sum2 = 0.0;
  for (float x : a) {
    ASSERT_TRUE(std::isfinite(x));
    sum += x;
    sum2 += static_cast<double>(x) * x;
  }
  // n = 10000 draws of 2·N(0, 1): the sample sd is within 2 ± 0.1 except with probability
  // ~1e-12 (its standard error is 2/√(2n) ≈ 0.014, and 0.1 is 7 of those).
  const double n = static_cast<double>(a.size());
  const double sd = std::sqrt(sum2 / n - (sum / n) * (sum / n));
  EXPECT_NEAR(sd, 2.0, 0.1);
  EXPECT_NEAR(sum / n, 0.0, 0.1);  // standard error 0.02
}

TEST(SyntheticLogits, BadShapesThrow) {
  SPECLAB_SKIP_WITHOUT_GPU();
  DeviceBuffer<float> out(8);
  gpu::SyntheticLogitsArgs a{.rows = 0, .vocab = 8, .out = out.span().data()};
  EXPECT_THROW(gpu::synthetic_logits(a, nullptr), InvalidInput);
  a.rows = 1;
  a.group = 3;
  a.base_group_stride = 2;
  EXPECT_THROW(gpu::synthetic_logits(a, nullptr), InvalidInput);
}

}  // namespace
}  // namespace speclab
