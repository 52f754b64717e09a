// core/models/quant_matrix: the repacked Q4_1 / Q8_0 matrix dequantises to what GGUF's
// dequantize() gives, quant_gemm equals the dequantise-then-fp32 product within the rounding
// bound of a float dot product (and bitwise equals skinny_gemm on the dequantised matrix, which
// sums in the same order), for ragged shapes and 1–16 positions; bad shapes are InvalidInput.
#include "core/models/quant_matrix.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <vector>

#include "core/base/error.hpp"
#include "core/io/gguf.hpp"
#include "core/models/skinny_gemm.hpp"
#include "tests/support/error_of.hpp"
#include "tests/support/quant_blocks.hpp"

namespace speclab {
namespace {

using testing::random_blocks;

using testing::error_of;
using ::testing::HasSubstr;

int64_t block_bytes(GgmlType type) { return ggml_type_traits(type).block_bytes; }

// The dequantised matrix, row-major [rows × depth], through GGUF's own dequantize().
std::vector<float> dequantised(GgmlType type, const std::vector<std::byte>& blocks, int64_t rows,
                               int64_t depth) {
  std::vector<float> w(static_cast<size_t>(rows * depth));
  const int64_t row_bytes = depth / 32 * block_bytes(type);
  for (int64_t i = 0; i < rows; ++i) {
    dequantize(type, blocks.data() + i * row_bytes, depth, w.data() + i * depth);
  }
  return w;
}

std::vector<float> random_x(int64_t n, uint64_t seed) {
  testing::TestRng rng{seed};
  std::vector<float> x(static_cast<size_t>(n));
  for (float& v : x) v = rng.uniform(-1.0f, 1.0f);
  return x;
}

struct Shape {
  int64_t rows, depth;
};
// Rows not a multiple of the 16-row panel, of the 2- and 4-panel kernel groups, or of the
// 4-panel OpenMP work item; depths of one and several blocks.
const Shape kShapes[] = {{1, 32}, {15, 64}, {37, 96}, {80, 32}, {130, 160}};
const GgmlType kTypes[] = {GgmlType::kQ4_1, GgmlType::kQ8_0};

TEST(QuantMatrix, DequantizeRowEqualsGgufDequantize) {
  for (GgmlType type : kTypes) {
    for (const Shape& s : kShapes) {
      const auto blocks = random_blocks(type, s.rows, s.depth, 11);
      const QuantMatrix w(type, blocks, s.rows, s.depth);
      const auto ref = dequantised(type, blocks, s.rows, s.depth);
      std::vector<float> row(static_cast<size_t>(s.depth));
      for (int64_t i = 0; i < s.rows; ++i) {
        w.dequantize_row(i, row);
        ASSERT_EQ(0, std::memcmp(row.data(), ref.data() + i * s.depth, row.size() * sizeof(float)))
            << ggml_type_name(type) << " " << s.rows << " × " << s.depth << " row " << i;
      }
    }
  }
}

// Both sides are float dot products of the same float weights (the test above) and activations.
// Any summation order, fused or not, gives |fl(Σ w·x) − Σ w·x| ≤ γ_k Σ|w·x| with γ_k = k·u/(1 −
// k·u), u = 2⁻²⁴ (Higham, Accuracy and Stability of Numerical Algorithms, §3.1); so the two
// differ by at most 2·γ_k Σ|w·x|, with Σ|w·x| evaluated here in double.
TEST(QuantGemm, EqualsDequantisedFp32ProductWithinRoundingBound) {
  const double u = std::ldexp(1.0, -24);
  for (GgmlType type : kTypes) {
    for (const Shape& s : kShapes) {
      const auto blocks = random_blocks(type, s.rows, s.depth, 21);
      const QuantMatrix w(type, blocks, s.rows, s.depth);
      const auto ref_w = dequantised(type, blocks, s.rows, s.depth);
      const double gamma = s.depth * u / (1.0 - s.depth * u);
      for (int64_t m = 1; m <= 16; ++m) {
        const int64_t ldx = s.depth + 3, ldo = s.rows + 5;  // strides with gaps
        const auto x = random_x(m * ldx, 100 + m);
        const float sentinel = std::numeric_limits<float>::quiet_NaN();
        std::vector<float> out(static_cast<size_t>(m * ldo), sentinel);
        quant_gemm(w, x, m, ldx, out, ldo);
        for (int64_t c = 0; c < m; ++c) {
          for (int64_t i = 0; i < ldo; ++i) {
            const float got = out[static_cast<size_t>(c * ldo + i)];
            if (i >= s.rows) {
              ASSERT_TRUE(std::isnan(got)) << "wrote past rows at column " << c << " row " << i;
              continue;
            }
            float fp32 = 0.0f;
            double magnitude = 0.0;
            for (int64_t k = 0; k < s.depth; ++k) {
              const float wk = ref_w[static_cast<size_t>(i * s.depth + k)];
              const float xk = x[static_cast<size_t>(c * ldx + k)];
              fp32 += wk * xk;
              magnitude += std::abs(static_cast<double>(wk) * xk);
            }
            ASSERT_LE(std::abs(static_cast<double>(got) - fp32), 2.0 * gamma * magnitude)
                << ggml_type_name(type) << " " << s.rows << " × " << s.depth << " m " << m
                << " column " << c << " row " << i << ": " << got << " vs " << fp32;
          }
        }
      }
    }
  }
}

// The same FMA chain over k in the same order as skinny_gemm on the dequantised PanelMatrix, so
// the LLaMA forward pass gives the same logits with either storage; and a column's result does
// not depend on the other columns of the call.
TEST(QuantGemm, BitwiseEqualsSkinnyGemmOnDequantisedWeights) {
  // The last shape has 2²² weights and takes the OpenMP path.
  std::vector<Shape> shapes(std::begin(kShapes), std::end(kShapes));
  shapes.push_back({4096, 1024});
  for (GgmlType type : kTypes) {
    for (const Shape& s : shapes) {
      const auto blocks = random_blocks(type, s.rows, s.depth, 31);
      const QuantMatrix w(type, blocks, s.rows, s.depth);
      const auto ref_w = dequantised(type, blocks, s.rows, s.depth);
      PanelMatrix panel(s.rows, s.depth);
      for (int64_t i = 0; i < s.rows; ++i) {
        for (int64_t k = 0; k < s.depth; ++k) panel.at(i, k) = ref_w[i * s.depth + k];
      }
      const bool big = s.rows * s.depth >= (int64_t{1} << 22);
      for (int64_t m = 1; m <= 16; m += big ? 7 : 1) {
        const auto x = random_x(m * s.depth, 200 + m);
        std::vector<float> got(static_cast<size_t>(m * s.rows)), want(got.size());
        quant_gemm(w, x, m, s.depth, got, s.rows);
        skinny_gemm(panel, {.rows = s.rows, .depth = s.depth, .n_cols = m}, x, s.depth, {}, want,
                    s.rows);
        ASSERT_EQ(0, std::memcmp(got.data(), want.data(), got.size() * sizeof(float)))
            << ggml_type_name(type) << " " << s.rows << " × " << s.depth << " m " << m;
        // Column m − 1 alone.
        std::vector<float> alone(static_cast<size_t>(s.rows));
        quant_gemm(w, std::span(x).subspan((m - 1) * s.depth), 1, s.depth, alone, s.rows);
        ASSERT_EQ(0, std::memcmp(alone.data(), got.data() + (m - 1) * s.rows,
                                 alone.size() * sizeof(float)))
            << ggml_type_name(type) << " " << s.rows << " × " << s.depth << " m " << m;
      }
    }
  }
}

TEST(QuantGemm, EmptyProductsWriteNothing) {
  const auto blocks = random_blocks(GgmlType::kQ8_0, 3, 32, 41);
  const QuantMatrix w(GgmlType::kQ8_0, blocks, 3, 32);
  std::vector<float> out(3, 7.0f);
  quant_gemm(w, {}, 0, 32, out, 3);
  EXPECT_THAT(out, ::testing::Each(7.0f));
  const QuantMatrix none(GgmlType::kQ4_1, {}, 0, 64);
  EXPECT_EQ(none.rows(), 0);
  quant_gemm(none, std::vector<float>(64), 1, 64, {}, 0);
}

TEST(QuantMatrix, RejectsBadTypesAndShapes) {
  const auto q4 = random_blocks(GgmlType::kQ4_1, 4, 64, 51);
  EXPECT_THAT(error_of([&] { (void)QuantMatrix(GgmlType::kF32, q4, 4, 64); }),
              HasSubstr("type F32; expected Q4_1 or Q8_0"));
  EXPECT_THAT(error_of([&] { (void)QuantMatrix(GgmlType::kQ4_0, q4, 4, 64); }),
              HasSubstr("type Q4_0; expected Q4_1 or Q8_0"));
  EXPECT_THAT(error_of([&] { (void)QuantMatrix(GgmlType::kQ4_1, q4, 4, 48); }),
              HasSubstr("depth a positive multiple of 32"));
  EXPECT_THAT(error_of([&] { (void)QuantMatrix(GgmlType::kQ4_1, q4, 4, 0); }),
              HasSubstr("depth a positive multiple of 32"));
  EXPECT_THAT(error_of([&] { (void)QuantMatrix(GgmlType::kQ4_1, q4, -1, 64); }),
              HasSubstr("expected rows ≥ 0"));
  EXPECT_THAT(error_of([&] { (void)QuantMatrix(GgmlType::kQ4_1, q4, 3, 64); }),
              HasSubstr("160 bytes of Q4_1 blocks for 3 × 64; expected 120 (20 per block)"));
  EXPECT_THAT(error_of([&] { (void)QuantMatrix(GgmlType::kQ8_0, q4, 4, 64); }),
              HasSubstr("expected 272 (34 per block)"));

  const QuantMatrix w(GgmlType::kQ4_1, q4, 4, 64);
  std::vector<float> row(64);
  EXPECT_THAT(error_of([&] { w.dequantize_row(4, row); }), HasSubstr("expected 0 ≤ row < 4"));
  EXPECT_THAT(error_of([&] { w.dequantize_row(0, std::span(row).first(63)); }),
              HasSubstr("and 64 floats"));
}

TEST(QuantGemm, RejectsInconsistentShapes) {
  const auto blocks = random_blocks(GgmlType::kQ8_0, 5, 64, 61);
  const QuantMatrix w(GgmlType::kQ8_0, blocks, 5, 64);
  const std::vector<float> x(2 * 64);
  std::vector<float> out(2 * 5);
  EXPECT_THAT(error_of([&] { quant_gemm(w, x, -1, 64, out, 5); }),
              HasSubstr("n_cols is -1; expected ≥ 0"));
  EXPECT_THAT(error_of([&] { quant_gemm(w, x, 2, 63, out, 5); }),
              HasSubstr("x has 128 values with ldx 63; expected 2 columns of depth 64"));
  EXPECT_THAT(error_of([&] { quant_gemm(w, x, 3, 64, out, 5); }),
              HasSubstr("x has 128 values with ldx 64; expected 3 columns"));
  EXPECT_THAT(error_of([&] { quant_gemm(w, x, 2, 64, out, 4); }),
              HasSubstr("out has 10 values with ldo 4; expected 2 columns of 5 outputs"));
  EXPECT_THAT(error_of([&] { quant_gemm(w, x, 2, 64, std::span(out).first(9), 5); }),
              HasSubstr("out has 9 values with ldo 5"));
  EXPECT_NO_THROW(quant_gemm(w, x, 2, 64, out, 5));
}

}  // namespace
}  // namespace speclab
