// The skinny product behind LinearSoftmax (docs/architecture.md "core/models"): out = A·X + b for a
// tall matrix A [rows × depth] and a few columns X (m·B ≤ ~16 at a time), streaming A from memory
// once, register-blocked over the columns and split over rows with OpenMP. Its cost stays nearly
// flat in the number of columns, which is what makes a verification pass of γ+1 tokens cost
// about as much as one token, as in a memory-bound LLM forward pass.
#pragma once

#include <cstdint>
#include <memory>
#include <span>

namespace speclab {

/// A [rows × depth] fp32 matrix stored in panels of kPanelRows rows, each panel depth-major:
/// A[p·16 + i][k] lives at data()[(p·depth + k)·16 + i]. Rows are zero-padded to a whole panel.
/// One step of k reads 64 contiguous bytes, the first `depth_used` columns of a panel are
/// contiguous, and the data is 64-byte aligned.
class PanelMatrix {
 public:
  static constexpr int64_t kPanelRows = 16;

  PanelMatrix() = default;
  /// Zero-filled.
  PanelMatrix(int64_t rows, int64_t depth);

  int64_t rows() const { return rows_; }
  int64_t depth() const { return depth_; }
  int64_t n_panels() const { return (rows_ + kPanelRows - 1) / kPanelRows; }
  /// Bytes of storage (padding included).
  int64_t bytes() const { return n_panels() * kPanelRows * depth_ * int64_t{sizeof(float)}; }

  float* data() { return data_.get(); }
  const float* data() const { return data_.get(); }
  float& at(int64_t row, int64_t k) {
    return data_[((row / kPanelRows) * depth_ + k) * kPanelRows + row % kPanelRows];
  }
  float at(int64_t row, int64_t k) const {
    return data_[((row / kPanelRows) * depth_ + k) * kPanelRows + row % kPanelRows];
  }

  /// A compact copy of A[0:rows, 0:depth] (a leading block).
  PanelMatrix leading_block(int64_t rows, int64_t depth) const;

 private:
  struct AlignedFree {
    void operator()(float* p) const;
  };
  int64_t rows_ = 0;
  int64_t depth_ = 0;
  std::unique_ptr<float[], AlignedFree> data_;
};

/// Matrices of at least this many elements (rows × depth) are split over all OpenMP threads; a
/// smaller one (a draft's 8 MB) runs on one, because the fork/join costs about what a second
/// thread saves and, on a loaded machine, waiting for a descheduled thread costs a time slice.
inline constexpr int64_t kSkinnyGemmParallelElements = int64_t{1} << 22;

/// The shape of one skinny product: uses the leading block A[0:rows, 0:depth].
struct SkinnyGemmShape {
  int64_t rows = 0;    ///< ≤ a.rows()
  int64_t depth = 0;   ///< ≤ a.depth()
  int64_t n_cols = 0;  ///< number of columns of X (any count; tiles of 8 are formed inside)
};

/// out[c·ldo + i] = bias[i] + Σ_{k<depth} A[i][k] · x[c·ldx + k] for i < rows, c < n_cols.
/// Each output is one fused multiply-add chain over k in increasing order starting from bias[i]
/// (or 0), so a column's result does not depend on which other columns share the call: scoring
/// m columns at once gives bitwise the same values as m calls with one column.
/// @param[in]  a     panel matrix, at least [rows × depth]
/// @param[in]  x     [n_cols × ldx] row-major, ldx ≥ depth (column c of X is x[c·ldx, +depth))
/// @param[in]  bias  [rows] or empty for none
/// @param[out] out   [n_cols × ldo] row-major, ldo ≥ rows
/// Throws InvalidInput on inconsistent shapes.
void skinny_gemm(const PanelMatrix& a, const SkinnyGemmShape& shape, std::span<const float> x,
                 int64_t ldx, std::span<const float> bias, std::span<float> out, int64_t ldo);

}  // namespace speclab
