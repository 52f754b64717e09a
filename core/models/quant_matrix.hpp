// Quantised weight matrices for the LLaMA forward pass (docs/architecture.md "core/models"): GGUF's
// Q4_1 and Q8_0 blocks repacked into 16-row panels, multiplied by activations quantised per
// 32-element block to 8 bits with integer dot products (AVX-512 VNNI vpdpbusd, AVX2
// vpmaddubsw/vpmaddwd, or portable scalar code, chosen at compile time), so a step streams
// ~0.6–1.1 bytes per weight and does one integer instruction per 32–64 multiply-adds. The
// product approximates the dequantised fp32 one within the activation rounding (quant_gemm).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>

#include "core/io/gguf.hpp"

namespace speclab {

/// A [rows × depth] weight matrix in a GGUF block format (Q4_1 or Q8_0: 32 weights of one row
/// per block), repacked in panels of 16 rows. Panel p, block b (weights k = 32b … 32b + 31 of rows
/// 16p … 16p + 15) is one contiguous record:
///   Q4_1 (320 bytes): fp16 d[16], fp16 m[16], then 4 chunks t of 64 bytes, byte 4i + u of
///        chunk t = q[i][4t + u] | q[i][16 + 4t + u] << 4; weight = d·q + m.
///   Q8_0 (544 bytes): fp16 d[16], then 8 chunks t of 64 bytes, byte 4i + u = int8 q[i][4t + u];
///        weight = d·q.
/// A chunk is one 64-byte register of 16 rows × 4 consecutive weights (or two 32-byte halves of
/// 8 rows), the operand of a 4-way byte dot product.
/// Records are stored panel by panel, block by block, so a panel streams contiguously. Rows are
/// padded to a whole panel with zero weights.
class QuantMatrix {
 public:
  static constexpr int64_t kPanelRows = 16;
  static constexpr int64_t kBlock = 32;

  QuantMatrix() = default;
  /// Repacks GGUF blocks: `blocks` holds `rows` rows of depth / 32 blocks of `type`, row after row
  /// (a GGUF tensor's data). InvalidInput for a type other than Q4_1 / Q8_0, a depth that is not
  /// a positive multiple of 32, negative rows, or a byte count that does not match the shape.
  QuantMatrix(GgmlType type, std::span<const std::byte> blocks, int64_t rows, int64_t depth);

  GgmlType type() const { return type_; }
  int64_t rows() const { return rows_; }
  int64_t depth() const { return depth_; }
  int64_t n_panels() const { return (rows_ + kPanelRows - 1) / kPanelRows; }
  int64_t n_blocks() const { return depth_ / kBlock; }
  /// Bytes of one panel × block record: 320 (Q4_1) or 544 (Q8_0).
  int64_t record_bytes() const;
  /// Bytes of storage (padding included).
  int64_t bytes() const { return n_panels() * n_blocks() * record_bytes(); }
  const std::byte* data() const { return data_.get(); }

  /// Row `row` dequantised into `out` [depth]: the values GGUF's dequantize() gives.
  void dequantize_row(int64_t row, std::span<float> out) const;

 private:
  struct AlignedFree {
    void operator()(std::byte* p) const;
  };
  GgmlType type_ = GgmlType::kQ4_1;
  int64_t rows_ = 0;
  int64_t depth_ = 0;
  std::unique_ptr<std::byte[], AlignedFree> data_;
};

/// out[c·ldo + i] ≈ Σ_{k<depth} W[i][k] · x[c·ldx + k] for i < rows, c < n_cols, with W the
/// dequantised matrix (out = x · Wᵀ for x [n_cols × depth]). Each column is quantised per block
/// b of 32 (as GGUF's Q8_1 / Q8_0): δ_b = max|x_k| / 127, q_k = round(x_k·(1/δ_b)) (to
/// nearest, ties to even; q_k = 0 when δ_b = 0), and σ_b = δ_b·Σq_k, all in float. An output
/// is then the float chain over blocks in increasing order
///   acc = fma(float(Σ_k qw_k·q_k), d_b·δ_b, acc), and for Q4_1 acc = fma(m_b, σ_b, acc),
/// with the integer sum exact; every ISA's kernel gives the same bits, and a column's result
/// does not depend on the other columns of the call. Against the fp32 product the error is the
/// activation rounding, |x_k − δ_b·q_k| ≤ δ_b / 2, so
///   |out − Σ W·x| ≤ Σ_b (δ_b / 2)·Σ_{k∈b} |W[i][k]| + float rounding.
/// @param[in]  w       quantised matrix [rows × depth]
/// @param[in]  x       [n_cols × ldx] row-major, ldx ≥ depth
/// @param[in]  n_cols  positions (any count; tiles of ≤ 8 are formed inside)
/// @param[out] out     [n_cols × ldo] row-major, ldo ≥ rows
/// Throws InvalidInput on inconsistent shapes.
void quant_gemm(const QuantMatrix& w, std::span<const float> x, int64_t n_cols, int64_t ldx,
                std::span<float> out, int64_t ldo);

/// The integer kernel this build compiled: "avx512-vnni", "avx2" or "scalar".
const char* quant_gemm_isa();

}  // namespace speclab
