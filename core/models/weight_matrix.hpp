// The weights of one linear layer of the LLaMA forward pass (core/models/llama.hpp), stored either
// dequantised to fp32 (PanelMatrix, skinny_gemm) or in their GGUF blocks (QuantMatrix,
// quant_gemm, 8-bit activations). The fp32 product is the reference; the quantised one stays
// within its activation rounding of it (quant_matrix.hpp) and streams ~0.6 instead of 4 bytes per
// weight.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <variant>

#include "core/io/gguf.hpp"
#include "core/models/quant_matrix.hpp"
#include "core/models/skinny_gemm.hpp"

namespace speclab {

/// How LlamaModel keeps its weight matrices.
enum class WeightStorage {
  kFp32,       ///< every matrix dequantised at load into a PanelMatrix
  kQuantised,  ///< Q4_1 / Q8_0 tensors kept as QuantMatrix; other types as fp32
};

/// "fp32" or "quantised".
std::string weight_storage_name(WeightStorage storage);

/// A [rows × depth] weight matrix in either storage.
class WeightMatrix {
 public:
  WeightMatrix() = default;
  /// The tensor (rows × depth as GGUF stores it: row_length() = depth) in `storage`.
  WeightMatrix(const GgufTensor& tensor, WeightStorage storage);

  int64_t rows() const;
  int64_t depth() const;
  /// Bytes of storage.
  int64_t bytes() const;
  bool quantised() const { return std::holds_alternative<QuantMatrix>(matrix_); }

  /// Row `row` as floats into `out` [depth] (an embedding lookup).
  void dequantize_row(int64_t row, std::span<float> out) const;
  /// y [n × rows] = x [n × depth] · Wᵀ, both row-major and dense. Throws InvalidInput on
  /// inconsistent sizes.
  void apply(std::span<const float> x, int64_t n, std::span<float> y) const;

 private:
  std::variant<PanelMatrix, QuantMatrix> matrix_;
};

}  // namespace speclab
