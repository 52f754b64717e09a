// gpu::synthetic_logits, the benchmark's input generator: a draft row [B, γ, V] sits on its own
// target row [B, γ+1, V] (row (b, i) on (b, i), never on the bonus row), the same seed gives the
// same values and another seed others, the values are finite with roughly the asked scale, and
// bf16 output is the fp32 output rounded to nearest even.
// Built for the device (label gpu) and for the SIMT emulation (gpu-emu).
#include "gpu/models/synthetic_logits.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "core/base/error.hpp"
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

std::vector<uint16_t> generate_bf16(uint64_t seed, int64_t rows, int64_t vocab, float scale,
                                    const float* base = nullptr, int64_t group = 1,
                                    int64_t stride = 1) {
  DeviceBuffer<uint16_t> out(rows * vocab);
  gpu::SyntheticLogitsArgs a{.seed = seed,
                             .rows = rows,
                             .vocab = vocab,
                             .scale = scale,
                             .base = base,
                             .group = group,
                             .base_group_stride = stride,
                             .out = out.span().data(),
                             .format = gpu::LogitsFormat::kBFloat16};
  EXPECT_EQ(gpu::synthetic_logits(a, nullptr), cudaSuccess);
  std::vector<uint16_t> host;
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

TEST(SyntheticLogits, BFloat16RoundsToNearestEven) {
  const auto bf16 = [](uint32_t bits) {
    return gpu::bfloat16_bits_from_float(gpu::float_from_bits(bits));
  };
  EXPECT_EQ(bf16(0x3f800000u), 0x3f80u);   // 1
  EXPECT_EQ(bf16(0x3f808000u), 0x3f80u);   // halfway, to the even 0x3f80
  EXPECT_EQ(bf16(0x3f818000u), 0x3f82u);   // halfway, to the even 0x3f82
  EXPECT_EQ(bf16(0x3f808001u), 0x3f81u);   // above halfway
  EXPECT_EQ(bf16(0x3f807fffu), 0x3f80u);   // below halfway
  EXPECT_EQ(bf16(0xbf818000u), 0xbf82u);   // negative, halfway
  EXPECT_EQ(bf16(0x80000000u), 0x8000u);   // -0
  EXPECT_EQ(bf16(0x7f7fffffu), 0x7f80u);   // the largest float rounds to +inf
  EXPECT_EQ(bf16(0xff800000u), 0xff80u);   // -inf
  const uint16_t nan = bf16(0x7f800001u);  // a NaN whose payload is in the dropped half
  EXPECT_TRUE(std::isnan(gpu::bfloat16_bits_to_float(nan))) << std::hex << nan;
}

TEST(SyntheticLogits, BFloat16IsTheFp32RoundedToNearestEven) {
  SPECLAB_SKIP_WITHOUT_GPU();
  const int64_t batch = 2, gamma = 3, vocab = 1001;
  const std::vector<float> target = generate(1, batch * (gamma + 1), vocab, 2.5f);
  const std::vector<uint16_t> target_bf16 = generate_bf16(1, batch * (gamma + 1), vocab, 2.5f);
  DeviceBuffer<float> d_target(target);
  const float* base = d_target.const_span().data();
  const std::vector<float> draft = generate(2, batch * gamma, vocab, 0.6f, base, gamma, gamma + 1);
  const std::vector<uint16_t> draft_bf16 =
      generate_bf16(2, batch * gamma, vocab, 0.6f, base, gamma, gamma + 1);
  ASSERT_EQ(target_bf16.size(), target.size());
  ASSERT_EQ(draft_bf16.size(), draft.size());
  int64_t rounded_up = 0;  // truncation would never round away from zero
  for (size_t i = 0; i < target.size(); ++i) {
    ASSERT_EQ(target_bf16[i], gpu::bfloat16_bits_from_float(target[i])) << "target entry " << i;
    rounded_up += std::abs(gpu::bfloat16_bits_to_float(target_bf16[i])) > std::abs(target[i]);
  }
  EXPECT_GT(rounded_up, 0);
  for (size_t i = 0; i < draft.size(); ++i) {
    ASSERT_EQ(draft_bf16[i], gpu::bfloat16_bits_from_float(draft[i])) << "draft entry " << i;
  }
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
  a.group = 1;
  a.base_group_stride = 1;
  a.format = gpu::LogitsFormat::kFloat16;  // not implemented: fp32 and bf16 only
  EXPECT_THROW(gpu::synthetic_logits(a, nullptr), InvalidInput);
}

}  // namespace
}  // namespace speclab
