// Reference implementations of the hand-written CPU kernels of core/models/ in Eigen 3.4, for the
// tests to check the kernels against (tests/unit/eigen_reference_test.cpp,
// tests/model/llama_reference_test.cpp). Each is written to be obviously correct rather than fast:
// plain Eigen expressions and loops in double precision, no tiling, no SIMD, no reuse of the
// kernels' code. Inputs are the kernels' own float inputs (a product of two floats is exact in
// double), so a reference's own rounding error is ~2⁻⁵³ relative and a test's tolerance is the
// kernel's fp32 error alone. Tests only: the libraries do not depend on Eigen.
//
//   affine                 A·X + b (skinny_gemm)
//   dequantise             GGUF F32 / F16 / Q8_0 / Q4_1 blocks to float (the weights of quant_gemm)
//   softmax_columns        the tempered softmax of LanguageModel::score at T > 0, no filters
//   linear_softmax_logits  G_r·(σ_r ⊙ (H_r·h)) + b of LinearSoftmaxModel
//   LlamaReference         the LLaMA forward pass of LlamaModel with a KV cache
//   all_close              |got − want| ≤ atol + rtol·scale, naming the first mismatches
#pragma once

#include <gtest/gtest.h>

#include <Eigen/Dense>
#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <limits>
#include <span>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

#include "core/io/gguf.hpp"
#include "core/models/linear_softmax.hpp"
#include "core/models/linear_softmax_embedding.hpp"
#include "core/models/model.hpp"
#include "core/models/skinny_gemm.hpp"

namespace speclab::eigen_ref {

using Matrix = Eigen::MatrixXd;  // column-major: one column per position
using Vector = Eigen::VectorXd;
using MatrixF = Eigen::MatrixXf;  // weights as stored (float), rows × depth
using VectorF = Eigen::VectorXf;

/// Unit roundoff of float, 2⁻²⁴.
inline constexpr double kFloatEps = 0x1p-24;

/// Higham's γ_k = k·u / (1 − k·u) for float: a float sum of k terms, in any order, fused or not,
/// is within γ_k · Σ|terms| of the exact sum (Accuracy and Stability of Numerical Algorithms,
/// §3.1).
inline double gamma_float(double k) { return k * kFloatEps / (1.0 - k * kFloatEps); }

// ---- layout conversions ---------------------------------------------------------------------

/// The kernels' column layout, x [n_cols × ldx] row-major with column c at x[c·ldx, +depth), as a
/// depth × n_cols matrix.
inline Matrix columns(std::span<const float> x, int64_t depth, int64_t n_cols, int64_t ldx) {
  Matrix out(depth, n_cols);
  for (int64_t c = 0; c < n_cols; ++c) {
    for (int64_t k = 0; k < depth; ++k) out(k, c) = x[static_cast<size_t>(c * ldx + k)];
  }
  return out;
}

/// A PanelMatrix's leading block A[0:rows, 0:depth], element by element through at().
inline Matrix from_panel(const PanelMatrix& a, int64_t rows, int64_t depth) {
  Matrix out(rows, depth);
  for (int64_t i = 0; i < rows; ++i) {
    for (int64_t k = 0; k < depth; ++k) out(i, k) = a.at(i, k);
  }
  return out;
}

inline Vector from_span(std::span<const float> v) {
  Vector out(static_cast<Eigen::Index>(v.size()));
  for (size_t i = 0; i < v.size(); ++i) out(static_cast<Eigen::Index>(i)) = v[i];
  return out;
}

// ---- skinny GEMM ----------------------------------------------------------------------------

/// A·X + b·1ᵀ (a size-0 b adds nothing): what skinny_gemm computes for the columns of X.
inline Matrix affine(const Matrix& a, const Matrix& x, const Vector& b) {
  Matrix out = a * x;
  if (b.size() > 0) out.colwise() += b;
  return out;
}

/// |A|·|X| + |b|·1ᵀ: the magnitude Σ|terms| that bounds the rounding error of each entry of A·X +
/// b computed in float (gamma_float).
inline Matrix affine_magnitude(const Matrix& a, const Matrix& x, const Vector& b) {
  Matrix out = a.cwiseAbs() * x.cwiseAbs();
  if (b.size() > 0) out.colwise() += b.cwiseAbs();
  return out;
}

// ---- GGUF dequantisation --------------------------------------------------------------------

/// IEEE binary16 bits as a float: (−1)^s · 2^(e−15) · (1 + f/1024), subnormals 2⁻¹⁴ · f/1024.
inline float half_to_float(uint16_t bits) {
  const int sign = bits >> 15, exponent = (bits >> 10) & 0x1f, fraction = bits & 0x3ff;
  float magnitude;
  if (exponent == 0) {
    magnitude = std::ldexp(static_cast<float>(fraction), -24);
  } else if (exponent == 31) {
    magnitude = fraction == 0 ? std::numeric_limits<float>::infinity()
                              : std::numeric_limits<float>::quiet_NaN();
  } else {
    magnitude = std::ldexp(static_cast<float>(1024 + fraction), exponent - 25);
  }
  return sign ? -magnitude : magnitude;
}

/// `rows` rows of `depth` weights of a GGUF tensor's data, as float, rounded as ggml rounds them:
///   F32: as is.   F16: half_to_float.
///   Q8_0 (34-byte blocks of 32): fp16 d, int8 q[32]; w_j = d·q_j.
///   Q4_1 (20-byte blocks of 32): fp16 d, fp16 m, 16 bytes qs; w_j = d·(qs[j] & 15) + m and
///        w_{16+j} = d·(qs[j] >> 4) + m for j < 16 (low nibbles first). d·q is exact in float, so
///        the sum is the only rounding, as in ggml.
inline MatrixF dequantise(GgmlType type, const std::byte* data, int64_t rows, int64_t depth) {
  MatrixF w(rows, depth);
  auto u16 = [](const std::byte* p) {
    uint16_t v;
    std::memcpy(&v, p, 2);
    return v;
  };
  for (int64_t i = 0; i < rows; ++i) {
    switch (type) {
      case GgmlType::kF32:
        for (int64_t k = 0; k < depth; ++k) {
          std::memcpy(&w(i, k), data + 4 * (i * depth + k), 4);
        }
        break;
      case GgmlType::kF16:
        for (int64_t k = 0; k < depth; ++k)
          w(i, k) = half_to_float(u16(data + 2 * (i * depth + k)));
        break;
      case GgmlType::kQ8_0:
        for (int64_t b = 0; b < depth / 32; ++b) {
          const std::byte* block = data + 34 * (i * (depth / 32) + b);
          const float d = half_to_float(u16(block));
          for (int j = 0; j < 32; ++j) {
            w(i, 32 * b + j) = d * static_cast<float>(static_cast<int8_t>(block[2 + j]));
          }
        }
        break;
      case GgmlType::kQ4_1:
        for (int64_t b = 0; b < depth / 32; ++b) {
          const std::byte* block = data + 20 * (i * (depth / 32) + b);
          const float d = half_to_float(u16(block)), m = half_to_float(u16(block + 2));
          for (int j = 0; j < 16; ++j) {
            const auto q = static_cast<uint8_t>(block[4 + j]);
            w(i, 32 * b + j) = d * static_cast<float>(q & 15) + m;
            w(i, 32 * b + 16 + j) = d * static_cast<float>(q >> 4) + m;
          }
        }
        break;
      default:
        ADD_FAILURE() << "eigen_ref::dequantise: no reference for " << ggml_type_name(type);
        return w;
    }
  }
  return w;
}

/// A GGUF tensor's rows × row_length() weights (a vector is one row).
inline MatrixF dequantise(const GgufTensor& t) {
  return dequantise(t.type(), t.data, t.n_rows(), t.row_length());
}

// ---- softmax --------------------------------------------------------------------------------

/// Each column of logits [V × n] to softmax(l / T): exp((l − max l) / T) / Σ. T > 0.
inline Matrix softmax_columns(const Matrix& logits, double temperature) {
  Matrix p(logits.rows(), logits.cols());
  for (Eigen::Index c = 0; c < logits.cols(); ++c) {
    const Vector e = ((logits.col(c).array() - logits.col(c).maxCoeff()) / temperature).exp();
    p.col(c) = e / e.sum();
  }
  return p;
}

// ---- LinearSoftmax --------------------------------------------------------------------------

/// The hidden vector of a context (linear_softmax.hpp): h = tanh(Σ_j w_j · e(t_{L−1−j})) over the
/// last n ≤ context tokens, w_j = decay^j / ‖(decay^0 … decay^(n−1))‖₂, e(t)_k the hashed
/// embedding value of linear_softmax_embedding.hpp.
inline Vector linear_softmax_hidden(const LinearSoftmaxFamily& family,
                                    std::span<const int32_t> context) {
  const LinearSoftmaxConfig& c = family.config();
  double norm2 = 0.0;
  for (int64_t j = 0; j < c.context; ++j) norm2 += std::pow(c.context_decay, 2.0 * j);
  const int64_t n = std::min<int64_t>(c.context, static_cast<int64_t>(context.size()));
  Vector sum = Vector::Zero(c.hidden);
  for (int64_t j = 0; j < n; ++j) {
    const uint32_t key = lsm::token_key(context[context.size() - 1 - static_cast<size_t>(j)],
                                        family.embedding_key());
    const double w = std::pow(c.context_decay, j) / std::sqrt(norm2);
    for (int64_t k = 0; k < c.hidden; ++k) sum(k) += w * lsm::embedding_value(key, k);
  }
  return sum.array().tanh();
}

/// The pieces of one LinearSoftmax logits product, with the magnitude that bounds its float
/// rounding.
struct LinearSoftmaxProduct {
  Matrix hidden;     ///< h, d × n_cols
  Matrix logits;     ///< G_r·(σ_r ⊙ (H_r·h)) + b, V × n_cols
  Matrix magnitude;  ///< |G_r|·(|σ_r| ⊙ (|H_r|·|h|)) + |b|, V × n_cols
};

/// LinearSoftmaxModel's raw logits for the rows of `requests` (column j of a request of length L
/// and m positions: the context tokens[0, L − m + 1 + j)), with the rank-r pieces of the family's
/// weights: H_r = H[0:r, :], σ_r = σ[0:r], G_r = G[:, 0:r].
inline LinearSoftmaxProduct linear_softmax_logits(const LinearSoftmaxFamily& family, int64_t rank,
                                                  std::span<const ScoreRequest> requests) {
  const int64_t d = family.config().hidden, v = family.config().vocab;
  std::vector<Vector> hidden;
  for (const ScoreRequest& r : requests) {
    const auto length = static_cast<int64_t>(r.tokens.size());
    for (int64_t j = 0; j < r.n_positions; ++j) {
      hidden.push_back(linear_softmax_hidden(
          family, r.tokens.first(static_cast<size_t>(length - r.n_positions + 1 + j))));
    }
  }
  LinearSoftmaxProduct out;
  out.hidden.resize(d, static_cast<Eigen::Index>(hidden.size()));
  for (size_t c = 0; c < hidden.size(); ++c)
    out.hidden.col(static_cast<Eigen::Index>(c)) = hidden[c];
  const Matrix h_r = from_panel(family.h(), rank, d);
  const Matrix g_r = from_panel(family.g(), v, rank);
  const Vector sigma_r = from_span(family.sigma()).head(rank);
  const Vector b = from_span(family.bias());
  const Matrix z = sigma_r.asDiagonal() * (h_r * out.hidden);
  out.logits = affine(g_r, z, b);
  const Matrix z_magnitude =
      sigma_r.cwiseAbs().asDiagonal() * (h_r.cwiseAbs() * out.hidden.cwiseAbs());
  out.magnitude = affine_magnitude(g_r, z_magnitude, b);
  return out;
}

// ---- LLaMA ----------------------------------------------------------------------------------

/// The LLaMA forward pass as llama.cpp computes it for LLM_ARCH_LLAMA (rope type 0), in double
/// over the weights of a GGUF file dequantised to float (dequantise above), read on its own from
/// the file's metadata and tensors:
///   x = token_embd[t]
///   per layer: a = RMSNorm(x)·w_attn;  q = Wq·a, k = Wk·a, v = Wv·a;  RoPE(q), RoPE(k);
///     per query head h (KV head g = h / (n_head / n_head_kv)) and position p:
///     o_h = Σ_{t ≤ p} softmax_t(q_h·k_{g,t} / √head_dim) · v_{g,t};  x += Wo·o
///     f = RMSNorm(x)·w_ffn;  x += W_down·(SiLU(W_gate·f) ⊙ (W_up·f))
///   logits = W_out·(RMSNorm(x)·w_out_norm), W_out = token_embd when output.weight is absent.
/// RMSNorm(x) = x / √(mean(x²) + ε). RoPE rotates the adjacent pairs (2i, 2i+1) of every head at
/// position p by p·base^(−2i/head_dim) (ggml's rope_norm: theta_scale = base^(−2/n_dims),
/// x0·cos − x1·sin, x0·sin + x1·cos), which is what the GGUF converter's permutation of the Q/K
/// weights expects.
class LlamaReference {
 public:
  struct Layer {
    VectorF attn_norm, ffn_norm;
    MatrixF wq, wk, wv, wo, w_gate, w_up, w_down;  // rows × depth, row i = output i
  };
  /// One sequence's keys and values: per layer kv × positions (kv = n_head_kv · head_dim).
  struct Cache {
    std::vector<Matrix> k, v;
    int64_t length = 0;
  };

  int64_t n_layer = 0, n_embd = 0, n_head = 0, n_head_kv = 0, head_dim = 0, n_ff = 0, vocab = 0;
  double rope_base = 10000.0, rms_eps = 1e-5;
  MatrixF token_embd, output;  // vocab × d; output empty when tied
  VectorF output_norm;
  std::vector<Layer> layers;

  explicit LlamaReference(const GgufFile& file) {
    n_layer = file.get_int("llama.block_count");
    n_embd = file.get_int("llama.embedding_length");
    n_head = file.get_int("llama.attention.head_count");
    n_head_kv = file.get_int("llama.attention.head_count_kv");
    n_ff = file.get_int("llama.feed_forward_length");
    rms_eps = file.get_float("llama.attention.layer_norm_rms_epsilon");
    if (file.find("llama.rope.freq_base") != nullptr) {
      rope_base = file.get_float("llama.rope.freq_base");
    }
    head_dim = n_embd / n_head;
    token_embd = dequantise(file.tensor("token_embd.weight"));
    vocab = token_embd.rows();
    if (file.has_tensor("output.weight")) output = dequantise(file.tensor("output.weight"));
    output_norm = norm_weights(file, "output_norm.weight");
    for (int64_t l = 0; l < n_layer; ++l) {
      const std::string p = "blk." + std::to_string(l) + ".";
      layers.push_back({.attn_norm = norm_weights(file, p + "attn_norm.weight"),
                        .ffn_norm = norm_weights(file, p + "ffn_norm.weight"),
                        .wq = dequantise(file.tensor(p + "attn_q.weight")),
                        .wk = dequantise(file.tensor(p + "attn_k.weight")),
                        .wv = dequantise(file.tensor(p + "attn_v.weight")),
                        .wo = dequantise(file.tensor(p + "attn_output.weight")),
                        .w_gate = dequantise(file.tensor(p + "ffn_gate.weight")),
                        .w_up = dequantise(file.tensor(p + "ffn_up.weight")),
                        .w_down = dequantise(file.tensor(p + "ffn_down.weight"))});
    }
  }

  /// Appends `tokens` at positions cache.length, cache.length + 1, … and returns the logits
  /// [vocab × m] of the last m of them.
  Matrix forward(Cache& cache, std::span<const int32_t> tokens, int64_t m) const {
    const auto n = static_cast<int64_t>(tokens.size());
    const int64_t start = cache.length, group = n_head / n_head_kv;
    if (cache.k.empty()) {
      cache.k.assign(static_cast<size_t>(n_layer), Matrix(n_head_kv * head_dim, 0));
      cache.v = cache.k;
    }
    Matrix x(n_embd, n);
    for (int64_t j = 0; j < n; ++j) {
      x.col(j) = token_embd.row(tokens[static_cast<size_t>(j)]).transpose().cast<double>();
    }
    for (int64_t l = 0; l < n_layer; ++l) {
      const Layer& w = layers[static_cast<size_t>(l)];
      const Matrix a = rms_norm(x, w.attn_norm);
      Matrix q = w.wq.cast<double>() * a;
      Matrix k = w.wk.cast<double>() * a;
      const Matrix v = w.wv.cast<double>() * a;
      rope(q, start);
      rope(k, start);
      Matrix& k_cache = cache.k[static_cast<size_t>(l)];
      Matrix& v_cache = cache.v[static_cast<size_t>(l)];
      k_cache.conservativeResize(Eigen::NoChange, start + n);
      v_cache.conservativeResize(Eigen::NoChange, start + n);
      k_cache.rightCols(n) = k;
      v_cache.rightCols(n) = v;

      Matrix o(n_embd, n);
      for (int64_t h = 0; h < n_head; ++h) {
        const int64_t g = h / group;
        const auto k_h = k_cache.middleRows(g * head_dim, head_dim);  // head_dim × (start + n)
        const auto v_h = v_cache.middleRows(g * head_dim, head_dim);
        // scores(t, j) = q_j·k_t / √head_dim; row j (position start + j) sees t ≤ start + j.
        Matrix scores = k_h.transpose() * q.middleRows(h * head_dim, head_dim) /
                        std::sqrt(static_cast<double>(head_dim));
        for (int64_t j = 0; j < n; ++j) {
          for (int64_t t = start + j + 1; t < start + n; ++t) {
            scores(t, j) = -std::numeric_limits<double>::infinity();
          }
        }
        o.middleRows(h * head_dim, head_dim) = v_h * softmax_columns(scores, 1.0);
      }
      x += w.wo.cast<double>() * o;

      const Matrix f = rms_norm(x, w.ffn_norm);
      const Matrix gate = w.w_gate.cast<double>() * f;
      const Matrix up = w.w_up.cast<double>() * f;
      const Matrix silu = gate.array() / (1.0 + (-gate.array()).exp());
      x += w.w_down.cast<double>() * silu.cwiseProduct(up);
    }
    cache.length += n;
    const MatrixF& head = output.size() > 0 ? output : token_embd;
    return head.cast<double>() * rms_norm(x.rightCols(m), output_norm);
  }

  /// The logits [vocab × m] of the last m positions of `tokens` from an empty cache.
  Matrix logits(std::span<const int32_t> tokens, int64_t m) const {
    Cache cache;
    return forward(cache, tokens, m);
  }

 private:
  static VectorF norm_weights(const GgufFile& file, const std::string& name) {
    return dequantise(file.tensor(name)).reshaped();
  }

  // Each column x_j / √(mean(x_j²) + ε), times w element-wise.
  Matrix rms_norm(const Matrix& x, const VectorF& w) const {
    Matrix out(x.rows(), x.cols());
    for (Eigen::Index j = 0; j < x.cols(); ++j) {
      const double rms =
          std::sqrt(x.col(j).squaredNorm() / static_cast<double>(x.rows()) + rms_eps);
      out.col(j) = (x.col(j) / rms).cwiseProduct(w.cast<double>());
    }
    return out;
  }

  // Rotates the pairs (2i, 2i+1) of every head of column j by (start + j)·base^(−2i/head_dim).
  void rope(Matrix& y, int64_t start) const {
    for (Eigen::Index j = 0; j < y.cols(); ++j) {
      const auto position = static_cast<double>(start + j);
      for (Eigen::Index h = 0; h < y.rows() / head_dim; ++h) {
        for (int64_t i = 0; i < head_dim / 2; ++i) {
          const double angle =
              position * std::pow(rope_base, -2.0 * static_cast<double>(i) / head_dim);
          const Eigen::Index e = h * head_dim + 2 * i;
          const double x0 = y(e, j), x1 = y(e + 1, j);
          y(e, j) = x0 * std::cos(angle) - x1 * std::sin(angle);
          y(e + 1, j) = x0 * std::sin(angle) + x1 * std::cos(angle);
        }
      }
    }
  }
};

// ---- comparison -----------------------------------------------------------------------------

/// Success when |got − want| ≤ atol + rtol·scale entry by entry (NaN fails), with a message
/// giving the largest error and the largest fraction of the allowed error used; otherwise a
/// message giving the largest error, how many entries fail and the first few (row, column, got,
/// want, error, allowed). `scale` has want's shape (often |want|, or the magnitude Σ|terms| that
/// bounds a sum's rounding). Rows and columns are printed as the matrices index them (row =
/// output index, column = position).
inline ::testing::AssertionResult all_close(std::string_view what, const Matrix& got,
                                            const Matrix& want, const Matrix& scale, double atol,
                                            double rtol, int max_listed = 5) {
  if (got.rows() != want.rows() || got.cols() != want.cols() || scale.rows() != want.rows() ||
      scale.cols() != want.cols()) {
    return ::testing::AssertionFailure()
           << what << ": got is " << got.rows() << " × " << got.cols() << ", want " << want.rows()
           << " × " << want.cols() << ", scale " << scale.rows() << " × " << scale.cols();
  }
  constexpr double kInf = std::numeric_limits<double>::infinity();
  std::ostringstream first;
  first.precision(7);
  int64_t failures = 0;
  double worst_ratio = 0.0, worst_error = 0.0;
  for (Eigen::Index c = 0; c < want.cols(); ++c) {
    for (Eigen::Index r = 0; r < want.rows(); ++r) {
      const double error = std::abs(got(r, c) - want(r, c));
      const double allowed = atol + rtol * scale(r, c);
      const bool ok = error <= allowed;  // false for NaN
      worst_error = std::max(worst_error, std::isnan(error) ? kInf : error);
      worst_ratio = std::max(worst_ratio, ok && error == 0.0 ? 0.0 : ok ? error / allowed : kInf);
      if (!ok && failures++ < max_listed) {
        first << "\n  row " << r << " col " << c << ": got " << got(r, c) << ", want " << want(r, c)
              << ", |error| " << error << " > allowed " << allowed;
      }
    }
  }
  std::ostringstream summary;
  summary.precision(3);
  summary << what << ": max |error| " << worst_error;
  if (failures == 0) {
    summary << ", " << worst_ratio << " of the allowed";
    return ::testing::AssertionSuccess() << summary.str();
  }
  summary << "; " << failures << " of " << want.size() << " entries above atol " << atol
          << " + rtol " << rtol << " · scale; first:";
  return ::testing::AssertionFailure() << summary.str() << first.str();
}

/// all_close with scale = |want|.
inline ::testing::AssertionResult all_close(std::string_view what, const Matrix& got,
                                            const Matrix& want, double atol, double rtol,
                                            int max_listed = 5) {
  return all_close(what, got, want, want.cwiseAbs(), atol, rtol, max_listed);
}

}  // namespace speclab::eigen_ref
