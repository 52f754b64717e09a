// WeightMatrix (see weight_matrix.hpp): dispatch to skinny_gemm or quant_gemm.
#include "core/models/weight_matrix.hpp"

#include <fmt/format.h>

#include <vector>

#include "core/base/error.hpp"

namespace speclab {

std::string weight_storage_name(WeightStorage storage) {
  return storage == WeightStorage::kFp32 ? "fp32" : "quantised";
}

WeightMatrix::WeightMatrix(const GgufTensor& tensor, WeightStorage storage) {
  const int64_t rows = tensor.n_rows(), depth = tensor.row_length();
  const bool blocks = tensor.type() == GgmlType::kQ4_1 || tensor.type() == GgmlType::kQ8_0;
  if (storage == WeightStorage::kQuantised && blocks) {
    matrix_.emplace<QuantMatrix>(
        tensor.type(), std::span(tensor.data, static_cast<size_t>(tensor.n_bytes())), rows, depth);
    return;
  }
  if (!ggml_type_supported(tensor.type())) {
    // Checked before the parallel loop: an exception cannot leave an OpenMP region.
    throw InvalidInput(
        fmt::format("tensor '{}' has type {}; speclab dequantises F32, F16, Q8_0 and Q4_1",
                    tensor.name(), ggml_type_name(tensor.type())));
  }
  PanelMatrix& a = matrix_.emplace<PanelMatrix>(rows, depth);
#pragma omp parallel
  {
    std::vector<float> row(static_cast<size_t>(depth));
#pragma omp for schedule(static)
    for (int64_t i = 0; i < rows; ++i) {
      tensor.dequantize_row(i, row);
      for (int64_t k = 0; k < depth; ++k) a.at(i, k) = row[static_cast<size_t>(k)];
    }
  }
}

int64_t WeightMatrix::rows() const {
  return std::visit([](const auto& m) { return m.rows(); }, matrix_);
}

int64_t WeightMatrix::depth() const {
  return std::visit([](const auto& m) { return m.depth(); }, matrix_);
}

int64_t WeightMatrix::bytes() const {
  return std::visit([](const auto& m) { return m.bytes(); }, matrix_);
}

void WeightMatrix::dequantize_row(int64_t row, std::span<float> out) const {
  if (const auto* q = std::get_if<QuantMatrix>(&matrix_)) {
    q->dequantize_row(row, out);
    return;
  }
  const auto& a = std::get<PanelMatrix>(matrix_);
  if (row < 0 || row >= a.rows() || static_cast<int64_t>(out.size()) != a.depth()) {
    throw InvalidInput(fmt::format(
        "WeightMatrix::dequantize_row: row {} into {} floats; expected 0 ≤ row < {} and {} floats",
        row, out.size(), a.rows(), a.depth()));
  }
  for (int64_t k = 0; k < a.depth(); ++k) out[static_cast<size_t>(k)] = a.at(row, k);
}

void WeightMatrix::apply(std::span<const float> x, int64_t n, std::span<float> y) const {
  if (const auto* q = std::get_if<QuantMatrix>(&matrix_)) {
    quant_gemm(*q, x, n, q->depth(), y, q->rows());
    return;
  }
  const auto& a = std::get<PanelMatrix>(matrix_);
  skinny_gemm(a, SkinnyGemmShape{a.rows(), a.depth(), n}, x, a.depth(), {}, y, a.rows());
}

}  // namespace speclab
