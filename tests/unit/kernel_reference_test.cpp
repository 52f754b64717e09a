// The hand-written matrix kernels of core/models/ against the Eigen references of
// tests/support/eigen_reference.hpp: skinny_gemm (A·X + b), quant_gemm (Q4_1 / Q8_0 weights
// times activations quantised per block to 8 bits) and LinearSoftmaxModel::score
// (G_r·(σ_r ⊙ (H_r·h)) + b, then the tempered softmax), at shapes that stress the tiling: m = 1, 3,
// 8, 9, 16, 17 columns (one or several 8-column tiles, partial tiles), rows not a multiple of the
// 16-row panel or of the 2- and 4-panel kernel groups, and products large enough for the OpenMP
// path. The references compute in double from the kernels' float inputs, so each tolerance is a
// bound on the kernel's float rounding (and, for quant_gemm, its activation quantisation), stated
// where it is used.
#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <span>
#include <string>
#include <vector>

#include "core/base/rules.hpp"
#include "core/io/gguf.hpp"
#include "core/models/linear_softmax.hpp"
#include "core/models/quant_matrix.hpp"
#include "core/models/skinny_gemm.hpp"
#include "core/probe/machine.hpp"
#include "tests/support/eigen_reference.hpp"
#include "tests/support/quant_blocks.hpp"

namespace speclab {
namespace {

using testing::random_blocks;

using eigen_ref::all_close;
using eigen_ref::gamma_float;
using eigen_ref::Matrix;
using eigen_ref::Vector;

std::vector<float> random_floats(size_t n, uint64_t seed) {
  testing::TestRng rng{seed};
  std::vector<float> v(n);
  for (float& x : v) x = rng.uniform(-1.0f, 1.0f);
  return v;
}

std::string shape_name(int64_t rows, int64_t depth, int64_t m) {
  return std::to_string(rows) + " × " + std::to_string(depth) + ", m = " + std::to_string(m);
}

// Runs skinny_gemm on a random rows × depth matrix for each m, with row-major strides ldx = depth
// + 3 and ldo = rows + 2, and compares with the reference A·X + b.
void check_skinny_gemm(int64_t rows, int64_t depth, std::span<const int64_t> ms, bool with_bias,
                       uint64_t seed) {
  PanelMatrix a(rows, depth);
  const auto values = random_floats(static_cast<size_t>(rows * depth), seed);
  for (int64_t i = 0; i < rows; ++i) {
    for (int64_t k = 0; k < depth; ++k) a.at(i, k) = values[static_cast<size_t>(i * depth + k)];
  }
  const auto bias = random_floats(static_cast<size_t>(rows), seed + 1);
  const Matrix a_ref = eigen_ref::from_panel(a, rows, depth);
  const Vector b_ref = with_bias ? eigen_ref::from_span(bias) : Vector();
  for (int64_t m : ms) {
    const int64_t ldx = depth + 3, ldo = rows + 2;
    const auto x = random_floats(static_cast<size_t>(m * ldx), seed + 2 + m);
    constexpr float kSentinel = -7.0f;
    std::vector<float> out(static_cast<size_t>(m * ldo), kSentinel);
    skinny_gemm(a, {.rows = rows, .depth = depth, .n_cols = m}, x, ldx,
                with_bias ? std::span<const float>(bias) : std::span<const float>(), out, ldo);
    const Matrix x_ref = eigen_ref::columns(x, depth, m, ldx);
    // Each output is a float sum of depth products and the bias (depth + 1 terms), in an order
    // the reference does not share: within γ_{depth+1}·Σ|terms| of the exact value (the
    // reference's own error, ~2⁻⁵³ relative, is far below). No absolute slack is needed.
    EXPECT_TRUE(
        all_close("skinny_gemm " + shape_name(rows, depth, m) + (with_bias ? " + bias" : ""),
                  eigen_ref::columns(out, rows, m, ldo), eigen_ref::affine(a_ref, x_ref, b_ref),
                  eigen_ref::affine_magnitude(a_ref, x_ref, b_ref), 0.0,
                  gamma_float(static_cast<double>(depth + 1))));
    for (int64_t c = 0; c < m; ++c) {
      for (int64_t i = rows; i < ldo; ++i) {
        ASSERT_EQ(out[static_cast<size_t>(c * ldo + i)], kSentinel)
            << shape_name(rows, depth, m) << ": wrote past the rows at column " << c;
      }
    }
  }
}

// Rows: one, one panel short, one over, 45 (3 panels: 2 + 1 for m ≤ 8), 100 (7 panels: one
// 4-panel work item, then 3 left over), 131 (9 panels, a last panel of 3 rows). Depths: 1, odd,
// a multiple of 16, and 70.
TEST(SkinnyGemm, MatchesEigenReference) {
  const int64_t ms[] = {1, 3, 8, 9, 16, 17};
  uint64_t seed = 1;
  for (int64_t rows : {1, 15, 17, 45, 100, 131}) {
    for (int64_t depth : {1, 13, 64, 70}) {
      for (bool with_bias : {false, true}) check_skinny_gemm(rows, depth, ms, with_bias, seed++);
    }
  }
}

// Every output lane is one chain over k, acc = fma(a_ik, x_k, acc) from the bias, whatever the
// ISA's vector width splits the 16-row panels into and whatever tile of R panels × C columns
// computes it: bit for bit the scalar chain. (A build for a CPU without FMA rounds each product;
// the library's ISA, not this file's compile flags, says which build this is.)
TEST(SkinnyGemm, EachOutputIsOneFusedMultiplyAddChain) {
  if (machine_identity().build_isa == "x86-64") GTEST_SKIP() << "the build has no FMA";
  uint64_t seed = 100;
  for (int64_t rows : {17, 70}) {
    for (int64_t depth : {1, 29}) {
      PanelMatrix a(rows, depth);
      const auto values = random_floats(static_cast<size_t>(rows * depth), seed++);
      for (int64_t i = 0; i < rows; ++i) {
        for (int64_t k = 0; k < depth; ++k) a.at(i, k) = values[static_cast<size_t>(i * depth + k)];
      }
      const auto bias = random_floats(static_cast<size_t>(rows), seed++);
      for (int64_t m : {1, 2, 3, 5, 8, 9, 17}) {
        const auto x = random_floats(static_cast<size_t>(m * depth), seed++);
        std::vector<float> out(static_cast<size_t>(m * rows));
        skinny_gemm(a, {.rows = rows, .depth = depth, .n_cols = m}, x, depth, bias, out, rows);
        for (int64_t c = 0; c < m; ++c) {
          for (int64_t i = 0; i < rows; ++i) {
            float acc = bias[static_cast<size_t>(i)];
            for (int64_t k = 0; k < depth; ++k) {
              const float w = a.at(i, k), xk = x[static_cast<size_t>(c * depth + k)];
              acc = std::fma(w, xk, acc);
            }
            ASSERT_EQ(std::bit_cast<uint32_t>(out[static_cast<size_t>(c * rows + i)]),
                      std::bit_cast<uint32_t>(acc))
                << shape_name(rows, depth, m) << ": row " << i << ", column " << c << ": "
                << out[static_cast<size_t>(c * rows + i)] << " vs the chain's " << acc << " (a "
                << a.at(i, 0) << ", x " << x[static_cast<size_t>(c * depth)] << ", bias "
                << bias[static_cast<size_t>(i)] << ")";
          }
        }
      }
    }
  }
}

// 4100 × 1030 weights ≥ 2²²: the product is split over OpenMP threads in chunks of work items;
// 4100 rows end in a partial panel.
TEST(SkinnyGemm, MatchesEigenReferenceOnTheThreadedPath) {
  const int64_t ms[] = {1, 3, 8, 9, 17};
  check_skinny_gemm(4100, 1030, ms, true, 99);
}

// ---- quant_gemm -----------------------------------------------------------------------------

const GgmlType kQuantTypes[] = {GgmlType::kQ4_1, GgmlType::kQ8_0};

void check_quant_gemm(GgmlType type, int64_t rows, int64_t depth, std::span<const int64_t> ms,
                      uint64_t seed) {
  const auto blocks = random_blocks(type, rows, depth, seed);
  const QuantMatrix w(type, blocks, rows, depth);
  const Matrix w_ref = eigen_ref::dequantise(type, blocks.data(), rows, depth).cast<double>();
  for (int64_t m : ms) {
    const int64_t ldx = depth + 5, ldo = rows + 3;
    const auto x = random_floats(static_cast<size_t>(m * ldx), seed + m);
    constexpr float kSentinel = -7.0f;
    std::vector<float> out(static_cast<size_t>(m * ldo), kSentinel);
    quant_gemm(w, x, m, ldx, out, ldo);
    const Matrix x_ref = eigen_ref::columns(x, depth, m, ldx);
    // The activations are quantised per 32-element block to δ·q with δ = max|x| / 127
    // (quant_matrix.hpp), each moved by ≤ δ·(1/2 + 381·u) (half a step, plus the float rounding
    // of δ, 1/δ and x·(1/δ)); the float work on the exact integer sums is ≤ 2·n_blocks + 3
    // roundings deep, and the reference's float weights are one rounding from d·q + m. So
    // |out − W·x| ≤ |W|·Δ·(1/2 + 381·u) + γ_{2·n_blocks+4}·|W|·(|x| + Δ), Δ_kc the δ of k's block.
    const double u = std::ldexp(1.0, -24);
    Matrix delta(depth, m);
    for (int64_t c = 0; c < m; ++c) {
      for (int64_t b = 0; b < depth / 32; ++b) {
        const double amax = x_ref.col(c).segment(32 * b, 32).cwiseAbs().maxCoeff();
        delta.col(c).segment(32 * b, 32).setConstant(amax / 127.0);
      }
    }
    const Matrix bound = w_ref.cwiseAbs() * delta * (0.5 + 381.0 * u) +
                         gamma_float(2.0 * static_cast<double>(depth / 32) + 4.0) *
                             (w_ref.cwiseAbs() * (x_ref.cwiseAbs() + delta));
    EXPECT_TRUE(all_close(
        std::string("quant_gemm ") + ggml_type_name(type) + " " + shape_name(rows, depth, m),
        eigen_ref::columns(out, rows, m, ldo), w_ref * x_ref, bound, 0.0, 1.0));
    for (int64_t c = 0; c < m; ++c) {
      for (int64_t i = rows; i < ldo; ++i) {
        ASSERT_EQ(out[static_cast<size_t>(c * ldo + i)], kSentinel)
            << shape_name(rows, depth, m) << ": wrote past the rows at column " << c;
      }
    }
  }
}

// The library's two dequantisations (GGUF's dequantize() of the source blocks and
// QuantMatrix::dequantize_row() of the repacked panels) give the reference's floats bit for bit.
TEST(QuantMatrix, DequantisesAsTheEigenReference) {
  for (GgmlType type : kQuantTypes) {
    const int64_t rows = 37, depth = 96;
    const auto blocks = random_blocks(type, rows, depth, 5);
    const QuantMatrix w(type, blocks, rows, depth);
    const eigen_ref::MatrixF ref = eigen_ref::dequantise(type, blocks.data(), rows, depth);
    std::vector<float> row(static_cast<size_t>(depth)), gguf(static_cast<size_t>(depth));
    const int64_t row_bytes = depth / 32 * ggml_type_traits(type).block_bytes;
    for (int64_t i = 0; i < rows; ++i) {
      w.dequantize_row(i, row);
      dequantize(type, blocks.data() + i * row_bytes, depth, gguf.data());
      for (int64_t k = 0; k < depth; ++k) {
        ASSERT_EQ(row[static_cast<size_t>(k)], ref(i, k))
            << ggml_type_name(type) << " QuantMatrix row " << i << " column " << k;
        ASSERT_EQ(gguf[static_cast<size_t>(k)], ref(i, k))
            << ggml_type_name(type) << " GGUF dequantize row " << i << " column " << k;
      }
    }
  }
}

// Rows as for skinny_gemm (the kernel groups 4 panels for m ≤ 4, 2 beyond); depths of one, three
// and five 32-weight blocks.
TEST(QuantGemm, MatchesEigenReferenceOnDequantisedWeights) {
  const int64_t ms[] = {1, 3, 8, 9, 16, 17};
  uint64_t seed = 100;
  for (GgmlType type : kQuantTypes) {
    for (int64_t rows : {1, 15, 37, 100, 130}) {
      for (int64_t depth : {32, 96, 160}) check_quant_gemm(type, rows, depth, ms, seed++);
    }
  }
}

// 4096 × 1024 weights = 2²²: the OpenMP path.
TEST(QuantGemm, MatchesEigenReferenceOnTheThreadedPath) {
  const int64_t ms[] = {1, 9};
  for (GgmlType type : kQuantTypes) check_quant_gemm(type, 4096, 1024, ms, 200);
}

// ---- LinearSoftmax --------------------------------------------------------------------------

std::vector<int32_t> random_tokens(int64_t n, int64_t vocab, uint64_t seed) {
  testing::TestRng rng{seed};
  std::vector<int32_t> tokens(static_cast<size_t>(n));
  for (auto& t : tokens) t = static_cast<int32_t>(rng.next() % static_cast<uint64_t>(vocab));
  return tokens;
}

// Bound on |logit − reference| for each entry of a LinearSoftmax product at rank r, hidden d,
// context n:
//  • the model's hidden vector: a float sum of n terms w_j·e_j (|e| ≤ √3), then float tanh
//    (≤ 2 ulp, slope ≤ 1): |δh| ≤ δ_h = (n + 3)·u·√3·Σ_j w_j for every entry;
//  • z = σ ⊙ (H_r·h): d products, then the σ multiply: within γ_{d+1} of its magnitude, plus
//    |σ| ⊙ (|H_r|·1)·δ_h from δh;
//  • G_r·z + b: r products and the bias: γ_{r+1}, plus |G_r|·|δz|.
// Together ≤ γ_{d+r+2}·magnitude + (1 + γ_{d+r+2})·|G_r|·(|σ_r| ⊙ (|H_r|·1))·δ_h, with magnitude
// = |G_r|·(|σ_r| ⊙ (|H_r|·|h|)) + |b| from the reference.
Matrix logit_error_bound(const LinearSoftmaxFamily& family, int64_t rank,
                         const eigen_ref::LinearSoftmaxProduct& ref) {
  const auto& c = family.config();
  const int64_t d = c.hidden, v = c.vocab;
  double weight_sum = 0.0, norm2 = 0.0;
  for (int64_t j = 0; j < c.context; ++j) norm2 += std::pow(c.context_decay, 2.0 * j);
  for (int64_t j = 0; j < c.context; ++j) weight_sum += std::pow(c.context_decay, j);
  const double delta_h = (static_cast<double>(c.context) + 3.0) * eigen_ref::kFloatEps *
                         std::sqrt(3.0) * weight_sum / std::sqrt(norm2);
  const double gamma = gamma_float(static_cast<double>(d + rank + 2));
  const Matrix h_abs = eigen_ref::from_panel(family.h(), rank, d).cwiseAbs();
  const Matrix g_abs = eigen_ref::from_panel(family.g(), v, rank).cwiseAbs();
  const Vector sigma_abs = eigen_ref::from_span(family.sigma()).head(rank).cwiseAbs();
  const Vector through_h = g_abs * (sigma_abs.asDiagonal() * (h_abs * Vector::Ones(d)));
  Matrix bound = gamma * ref.magnitude;
  bound.colwise() += (1.0 + gamma) * delta_h * through_h;
  return bound;
}

// score() returns softmax(l/T) of the logits l. With |δl_i| ≤ Δ over a row (logit_error_bound),
// the exact softmax of the model's logits is within a factor e^{±2Δ/T} of the reference's; the
// float softmax (sampling.cpp: (l − max)·(1/T) rounded three times, exp to ~4 ulp, float lane sums
// of at most min(V, 2048)/16 values per block, one scaling) adds a relative (3·|arg|_max + min(V,
// 2048)/16 + 24)·u, doubled here for slack. Probabilities below e^{-87} are flushed to zero (atol
// 1e-30).
void check_probabilities(const std::string& what, const std::vector<float>& probs,
                         const Matrix& logits_ref, const Matrix& logit_bound, double temperature) {
  const int64_t v = logits_ref.rows(), n = logits_ref.cols();
  const Matrix p_ref = eigen_ref::softmax_columns(logits_ref, temperature);
  const Matrix got = eigen_ref::columns(probs, v, n, v);
  Matrix scale(v, n);
  for (int64_t c = 0; c < n; ++c) {
    const double delta = logit_bound.col(c).maxCoeff();
    const double max_arg =
        (logits_ref.col(c).maxCoeff() - logits_ref.col(c).minCoeff()) / temperature;
    const double rel =
        std::expm1(2.0 * delta / temperature) +
        2.0 *
            (3.0 * max_arg +
             static_cast<double>(std::min<int64_t>(v, kNormaliserBlockTokens)) / 16.0 + 24.0) *
            eigen_ref::kFloatEps;
    scale.col(c) = rel * p_ref.col(c);
  }
  EXPECT_TRUE(all_close(what, got, p_ref, scale, 1e-30, 1.0));
}

LinearSoftmaxConfig reference_config() {
  // V = 1000 (62.5 panels), d = 45 (not a multiple of 16), n = 3.
  return {.family = "reference",
          .vocab = 1000,
          .hidden = 45,
          .context = 3,
          .context_decay = 0.7,
          .sigma_decay = 0.8,
          .logit_scale = 6.0,
          .zipf = 1.0,
          .seed = 17};
}

// One sequence of 12 tokens scored at its last m positions (row j: the context tokens[0, 12 − m +
// 1 + j)), for the target (rank 45) and drafts of rank 21 and 1, at T = 1 and T = 0.7.
TEST(LinearSoftmax, ProbabilitiesMatchEigenReference) {
  const auto family = LinearSoftmaxFamily::create(reference_config());
  const auto tokens = random_tokens(12, family->config().vocab, 3);
  for (int64_t rank : {45, 21, 1}) {
    auto model = rank == 45 ? family->make_target() : family->make_draft(rank);
    for (int64_t m : {1, 3, 8, 9}) {
      const ScoreRequest request{.tokens = tokens, .n_positions = m};
      const auto ref = eigen_ref::linear_softmax_logits(*family, rank, {&request, 1});
      const Matrix bound = logit_error_bound(*family, rank, ref);
      for (double temperature : {1.0, 0.7}) {
        const auto probs = model->score({&request, 1}, {.temperature = temperature});
        check_probabilities(
            model->name() + " m = " + std::to_string(m) + " T = " + std::to_string(temperature),
            probs, ref.logits, bound, temperature);
      }
    }
  }
}

// A batch of three sequences with 17 rows in all (three 8-column tiles, the last partial), each
// row's context its own.
TEST(LinearSoftmax, BatchProbabilitiesMatchEigenReference) {
  const auto family = LinearSoftmaxFamily::create(reference_config());
  const auto tokens = random_tokens(30, family->config().vocab, 4);
  const std::vector<ScoreRequest> requests = {
      {.tokens = std::span(tokens).first(9), .n_positions = 8, .sequence_id = 0},
      {.tokens = std::span(tokens).subspan(9, 1), .n_positions = 1, .sequence_id = 1},
      {.tokens = std::span(tokens).subspan(10, 20), .n_positions = 8, .sequence_id = 2}};
  for (int64_t rank : {45, 21}) {
    auto model = rank == 45 ? family->make_target() : family->make_draft(rank);
    const auto ref = eigen_ref::linear_softmax_logits(*family, rank, requests);
    const auto probs = model->score(requests, {.temperature = 0.7});
    check_probabilities(model->name() + " batch of 17 rows", probs, ref.logits,
                        logit_error_bound(*family, rank, ref), 0.7);
  }
}

}  // namespace
}  // namespace speclab
