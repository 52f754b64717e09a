// core/models/quant_matrix: the repacked Q4_1 / Q8_0 matrix dequantises to what GGUF's
// dequantize() gives; quant_gemm bitwise equals a blockwise 8-bit reference written from the GGUF
// blocks, and the exact dequantised product within the derived activation-rounding bound, for
// ragged shapes and 1–16 positions; NaN activations propagate; bad shapes are InvalidInput.
#include "core/models/quant_matrix.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <vector>

#include "core/base/error.hpp"
#include "core/io/gguf.hpp"
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

// The blockwise 8-bit product written out from the GGUF blocks themselves (not the repacked
// panels): each column quantised per 32-element block b as quant_matrix.hpp states
// (δ = max|x| / 127, q = round-to-nearest-even(x·(1/δ)), σ = δ·Σq), the integer dot with the
// block's quants, then acc = fma(float(dot), d·δ, acc) and, for Q4_1, acc = fma(m, σ, acc).
std::vector<float> blockwise_reference(GgmlType type, const std::vector<std::byte>& blocks,
                                       int64_t rows, int64_t depth, const std::vector<float>& x,
                                       int64_t m, int64_t ldx) {
  const int64_t nb = depth / 32, size = block_bytes(type);
  std::vector<float> out(static_cast<size_t>(m * rows));
  for (int64_t c = 0; c < m; ++c) {
    std::vector<int> q(static_cast<size_t>(depth));
    std::vector<float> delta(static_cast<size_t>(nb)), sigma(static_cast<size_t>(nb));
    for (int64_t b = 0; b < nb; ++b) {
      const float* xb = x.data() + c * ldx + 32 * b;
      float amax = 0.0f;
      for (int e = 0; e < 32; ++e) amax = std::max(amax, std::abs(xb[e]));
      const float dx = amax / 127.0f, inv = dx != 0.0f ? 1.0f / dx : 0.0f;
      int sum = 0;
      for (int e = 0; e < 32; ++e) {
        q[static_cast<size_t>(32 * b + e)] = static_cast<int>(std::nearbyint(xb[e] * inv));
        sum += q[static_cast<size_t>(32 * b + e)];
      }
      delta[static_cast<size_t>(b)] = dx;
      sigma[static_cast<size_t>(b)] = dx * static_cast<float>(sum);
    }
    for (int64_t i = 0; i < rows; ++i) {
      float acc = 0.0f;
      for (int64_t b = 0; b < nb; ++b) {
        const std::byte* blk = blocks.data() + (i * nb + b) * size;
        uint16_t dh, mh;
        std::memcpy(&dh, blk, 2);
        int dot = 0;
        for (int e = 0; e < 32; ++e) {
          int qw;
          if (type == GgmlType::kQ4_1) {
            const auto byte = static_cast<uint8_t>(blk[4 + e % 16]);
            qw = e < 16 ? byte & 0x0f : byte >> 4;  // GGUF: byte j holds elements j and j + 16
          } else {
            qw = static_cast<int8_t>(blk[2 + e]);
          }
          dot += qw * q[static_cast<size_t>(32 * b + e)];
        }
        const float d = fp16_to_float(dh);
        acc = std::fma(static_cast<float>(dot), d * delta[static_cast<size_t>(b)], acc);
        if (type == GgmlType::kQ4_1) {
          std::memcpy(&mh, blk + 2, 2);
          acc = std::fma(fp16_to_float(mh), sigma[static_cast<size_t>(b)], acc);
        }
      }
      out[static_cast<size_t>(c * rows + i)] = acc;
    }
  }
  return out;
}

// The kernel (whichever ISA this build compiled, quant_gemm_isa()) gives the reference's bits:
// the repacking, the nibble order, the unsigned-times-signed byte products and the Q8_0 sign
// handling are all in what it checks. As the reference computes each column alone, a column's
// result does not depend on the other columns of the call.
TEST(QuantGemm, BitwiseEqualsTheBlockwiseInt8Reference) {
  // The last shape has 2²² weights and takes the OpenMP path.
  std::vector<Shape> shapes(std::begin(kShapes), std::end(kShapes));
  shapes.push_back({4096, 1024});
  for (GgmlType type : kTypes) {
    for (const Shape& s : shapes) {
      const auto blocks = random_blocks(type, s.rows, s.depth, 31);
      const QuantMatrix w(type, blocks, s.rows, s.depth);
      const bool big = s.rows * s.depth >= (int64_t{1} << 22);
      for (int64_t m = 1; m <= 16; m += big ? 7 : 1) {
        const int64_t ldx = s.depth + 3;
        auto x = random_x(m * ldx, 200 + m);
        // An all-zero block (δ = 0) in the first column.
        std::fill_n(x.begin(), 32, 0.0f);
        std::vector<float> got(static_cast<size_t>(m * s.rows));
        quant_gemm(w, x, m, ldx, got, s.rows);
        const auto want = blockwise_reference(type, blocks, s.rows, s.depth, x, m, ldx);
        ASSERT_EQ(0, std::memcmp(got.data(), want.data(), got.size() * sizeof(float)))
            << ggml_type_name(type) << " " << s.rows << " × " << s.depth << " m " << m << " ("
            << quant_gemm_isa() << ")";
      }
    }
  }
}

// Against the exact product with the exactly dequantised weights w_k = d·q_k (+ m), in double.
// Quantising a block's activations moves each by |x_k − δ·q_k| ≤ δ·(1/2 + 3·127·u) (the half
// step of rounding, plus the float rounding of δ, 1/δ and x·(1/δ), each ≤ u relative, which can
// move x·(1/δ) ≤ 127 by 3·127·u), so the product moves by at most
//   A = Σ_b δ_b·(1/2 + 381·u)·Σ_{k∈b} |w_k|.
// The kernel's float work on the exact integer sums (d·δ, σ = δ·Σq, two fused multiply-adds per
// block) is a float sum of ≤ 2·n_blocks terms each rounded ≤ 2 times: within γ_{2·n_blocks+3}·M
// of its exact value, M = Σ_b Σ_k (|d·q_k| + |m|)·(|x_k| + δ_b) (Higham, Accuracy and
// Stability of Numerical Algorithms, §3.1; u = 2⁻²⁴, γ_n = n·u/(1 − n·u)).
TEST(QuantGemm, WithinTheActivationRoundingBoundOfTheExactProduct) {
  const double u = std::ldexp(1.0, -24);
  for (GgmlType type : kTypes) {
    for (const Shape& s : kShapes) {
      const auto blocks = random_blocks(type, s.rows, s.depth, 21);
      const QuantMatrix w(type, blocks, s.rows, s.depth);
      const int64_t nb = s.depth / 32, size = block_bytes(type);
      const double n = 2.0 * static_cast<double>(nb) + 3.0, gamma = n * u / (1.0 - n * u);
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
            double exact = 0.0, activation = 0.0, magnitude = 0.0;
            for (int64_t b = 0; b < nb; ++b) {
              const std::byte* blk = blocks.data() + (i * nb + b) * size;
              uint16_t dh, mh = 0;
              std::memcpy(&dh, blk, 2);
              if (type == GgmlType::kQ4_1) std::memcpy(&mh, blk + 2, 2);
              const double d = fp16_to_float(dh), mw = fp16_to_float(mh);
              double amax = 0.0;
              for (int e = 0; e < 32; ++e) {
                amax = std::max(amax, std::abs(static_cast<double>(x[c * ldx + 32 * b + e])));
              }
              const double delta = amax / 127.0;
              double w_abs = 0.0;
              for (int e = 0; e < 32; ++e) {
                double qw;
                if (type == GgmlType::kQ4_1) {
                  const auto byte = static_cast<uint8_t>(blk[4 + e % 16]);
                  qw = e < 16 ? byte & 0x0f : byte >> 4;
                } else {
                  qw = static_cast<int8_t>(blk[2 + e]);
                }
                const double wk = d * qw + mw, xk = x[c * ldx + 32 * b + e];
                exact += wk * xk;
                w_abs += std::abs(wk);
                magnitude += (std::abs(d * qw) + std::abs(mw)) * (std::abs(xk) + delta);
              }
              activation += delta * (0.5 + 381.0 * u) * w_abs;
            }
            ASSERT_LE(std::abs(static_cast<double>(got) - exact), activation + gamma * magnitude)
                << ggml_type_name(type) << " " << s.rows << " × " << s.depth << " m " << m
                << " column " << c << " row " << i << ": " << got << " vs " << exact;
          }
        }
      }
    }
  }
}

// A NaN activation makes its column's outputs NaN (as the fp32 product's), and only its column's.
TEST(QuantGemm, NanActivationGivesNanOutputsInItsColumn) {
  for (GgmlType type : kTypes) {
    const auto blocks = random_blocks(type, 20, 64, 71);
    const QuantMatrix w(type, blocks, 20, 64);
    auto x = random_x(3 * 64, 72);
    x[64 + 40] = std::numeric_limits<float>::quiet_NaN();  // column 1, second block
    std::vector<float> out(3 * 20);
    quant_gemm(w, x, 3, 64, out, 20);
    for (int64_t c = 0; c < 3; ++c) {
      for (int64_t i = 0; i < 20; ++i) {
        EXPECT_EQ(std::isnan(out[static_cast<size_t>(c * 20 + i)]), c == 1)
            << ggml_type_name(type) << " column " << c << " row " << i;
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
