// core/models/weight_matrix: the fp32 and the quantised storage of one GGUF tensor give the same
// rows bit for bit and the products of their kernels (skinny_gemm on the dequantised rows,
// quant_gemm on the blocks), a type without blocks falls back to fp32, and a type
// speclab cannot dequantise is InvalidInput before any parallel work starts.
#include "core/models/weight_matrix.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "core/base/error.hpp"
#include "tests/support/error_of.hpp"

namespace speclab {
namespace {

using testing::error_of;
using ::testing::HasSubstr;

// A tensor of `rows` rows × `depth` of `type` over random bytes with fp16 scales near 0.01.
struct Tensor {
  GgufTensorInfo info;
  std::vector<std::byte> bytes;
  GgufTensor view() const { return {&info, bytes.data()}; }
};

Tensor random_tensor(GgmlType type, int64_t rows, int64_t depth) {
  const GgmlTypeTraits traits = ggml_type_traits(type);
  Tensor t;
  t.info = {
      .name = "w",
      .shape = {depth, rows},
      .type = type,
      .n_elements = rows * depth,
      .n_bytes = static_cast<uint64_t>(rows * depth / traits.block_elements * traits.block_bytes)};
  t.bytes.resize(t.info.n_bytes);
  uint64_t s = 3;
  for (auto& b : t.bytes) {
    s = s * 6364136223846793005ULL + 1442695040888963407ULL;
    b = static_cast<std::byte>(s >> 56);
  }
  const uint16_t scale = 0x211f;  // fp16 ≈ 0.01
  if (type == GgmlType::kF16) {
    for (size_t i = 0; i < t.bytes.size(); i += 2) std::memcpy(&t.bytes[i], &scale, 2);
  } else if (type == GgmlType::kQ4_1 || type == GgmlType::kQ8_0) {
    for (size_t i = 0; i < t.bytes.size(); i += traits.block_bytes) {
      std::memcpy(&t.bytes[i], &scale, 2);
    }
  }
  return t;
}

TEST(WeightMatrix, StoragesGiveTheSameRowsAndTheirKernelsProducts) {
  constexpr int64_t kRows = 48, kDepth = 96, kCols = 5;
  for (GgmlType type : {GgmlType::kQ4_1, GgmlType::kQ8_0, GgmlType::kF16}) {
    const Tensor t = random_tensor(type, kRows, kDepth);
    const WeightMatrix fp32(t.view(), WeightStorage::kFp32);
    const WeightMatrix quantised(t.view(), WeightStorage::kQuantised);
    const bool blocks = type != GgmlType::kF16;
    EXPECT_FALSE(fp32.quantised());
    EXPECT_EQ(quantised.quantised(), blocks) << ggml_type_name(type);
    // 48 rows fill whole panels: the blocks as stored, or 4 bytes per weight.
    EXPECT_EQ(fp32.bytes(), 4 * kRows * kDepth);
    EXPECT_EQ(quantised.bytes(), blocks ? static_cast<int64_t>(t.info.n_bytes) : fp32.bytes());

    std::vector<float> a(kDepth), b(kDepth);
    for (int64_t i = 0; i < kRows; ++i) {
      fp32.dequantize_row(i, a);
      quantised.dequantize_row(i, b);
      ASSERT_EQ(0, std::memcmp(a.data(), b.data(), a.size() * sizeof(float))) << "row " << i;
    }
    std::vector<float> x(kCols * kDepth);
    for (size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>(i % 7) - 3.0f;
    std::vector<float> y_fp32(kCols * kRows), y_quantised(y_fp32.size());
    fp32.apply(x, kCols, y_fp32);
    quantised.apply(x, kCols, y_quantised);
    // The fp32 storage is skinny_gemm on the dequantised rows; the quantised one is quant_gemm on
    // the blocks (8-bit activations, within quant_gemm's bound of the fp32 product, checked in
    // quant_matrix_test) and, for F16, the fp32 product itself.
    std::vector<float> y_ref(y_fp32.size());
    if (blocks) {
      const QuantMatrix q(type, t.bytes, kRows, kDepth);
      quant_gemm(q, x, kCols, kDepth, y_ref, kRows);
    } else {
      y_ref = y_fp32;
    }
    EXPECT_EQ(0, std::memcmp(y_ref.data(), y_quantised.data(), y_ref.size() * sizeof(float)))
        << ggml_type_name(type);
    PanelMatrix panel(kRows, kDepth);
    for (int64_t i = 0; i < kRows; ++i) {
      fp32.dequantize_row(i, a);
      for (int64_t k = 0; k < kDepth; ++k) panel.at(i, k) = a[static_cast<size_t>(k)];
    }
    std::vector<float> y_skinny(y_fp32.size());
    skinny_gemm(panel, {.rows = kRows, .depth = kDepth, .n_cols = kCols}, x, kDepth, {}, y_skinny,
                kRows);
    EXPECT_EQ(0, std::memcmp(y_skinny.data(), y_fp32.data(), y_fp32.size() * sizeof(float)))
        << ggml_type_name(type);
  }
}

TEST(WeightMatrix, UndequantisableTypeIsInvalidInput) {
  const Tensor t = random_tensor(GgmlType::kQ4_0, 16, 64);
  for (WeightStorage storage : {WeightStorage::kFp32, WeightStorage::kQuantised}) {
    EXPECT_THAT(error_of([&] { (void)WeightMatrix(t.view(), storage); }),
                HasSubstr("tensor 'w' has type Q4_0; speclab dequantises F32, F16, Q8_0 and Q4_1"));
  }
}

TEST(WeightMatrix, RejectsBadRowsAndSizes) {
  const Tensor t = random_tensor(GgmlType::kQ8_0, 16, 64);
  for (WeightStorage storage : {WeightStorage::kFp32, WeightStorage::kQuantised}) {
    const WeightMatrix w(t.view(), storage);
    std::vector<float> row(64), y(16);
    EXPECT_THAT(error_of([&] { w.dequantize_row(16, row); }), HasSubstr("expected 0 ≤ row < 16"));
    EXPECT_THAT(error_of([&] { w.apply(std::vector<float>(63), 1, y); }),
                HasSubstr("x has 63 values"));
    EXPECT_THAT(error_of([&] { w.apply(row, 1, std::span(y).first(15)); }),
                HasSubstr("out has 15 values"));
  }
}

}  // namespace
}  // namespace speclab
