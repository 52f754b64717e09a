// cublasSgemm against a naive column-major reference for every transpose combination, odd sizes
// and leading dimensions larger than the matrices, alpha/beta (beta = 0 must not read C), and the
// documented argument errors. On the device it checks cuBLAS as speclab calls it; under the SIMT
// emulation (gpu-emu) it checks the emulated cuBLAS of gpu/emulation/cublas.cpp.
#include <cublas_v2.h>
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>
#include <vector>

#include "gpu/base/cublas_check.hpp"
#include "tests/gpu/gpu_test_util.hpp"
#include "tests/gpu/verify_chain_harness.hpp"

namespace speclab {
namespace {

using testing::DeviceBuffer;

// op(X)(row, col) for a column-major X with leading dimension ld.
double op_at(const std::vector<float>& x, int ld, cublasOperation_t op, int row, int col) {
  return op == CUBLAS_OP_N ? x[static_cast<size_t>(col) * ld + row]
                           : x[static_cast<size_t>(row) * ld + col];
}

struct Case {
  cublasOperation_t ta, tb;
  int m, n, k, pad_a, pad_b, pad_c;
  float alpha, beta;
};

TEST(CublasSgemm, MatchesNaiveReference) {
  SPECLAB_SKIP_WITHOUT_GPU();
  cublasHandle_t handle = nullptr;
  SPECLAB_CUBLAS_CHECK(cublasCreate(&handle));
  std::mt19937 rng(20261129);
  std::uniform_real_distribution<float> value(-1.0f, 1.0f);
  const cublasOperation_t ops[] = {CUBLAS_OP_N, CUBLAS_OP_T, CUBLAS_OP_C};
  std::vector<Case> cases;
  for (auto ta : ops) {
    for (auto tb : ops) {
      cases.push_back({ta, tb, 7, 5, 3, 0, 0, 0, 1.0f, 0.0f});
      cases.push_back({ta, tb, 13, 1, 9, 3, 5, 2, 0.5f, 0.0f});
      cases.push_back({ta, tb, 1, 11, 17, 1, 0, 7, -1.5f, 2.0f});
      cases.push_back({ta, tb, 33, 9, 65, 5, 3, 1, 1.0f, 1.0f});
      cases.push_back({ta, tb, 6, 4, 0, 1, 1, 1, 1.0f, 0.5f});   // k = 0: C = beta·C
      cases.push_back({ta, tb, 5, 3, 4, 0, 2, 0, 0.0f, -1.0f});  // alpha = 0: A, B unused
    }
  }
  for (const Case& c : cases) {
    const int rows_a = c.ta == CUBLAS_OP_N ? c.m : c.k, cols_a = c.ta == CUBLAS_OP_N ? c.k : c.m;
    const int rows_b = c.tb == CUBLAS_OP_N ? c.k : c.n, cols_b = c.tb == CUBLAS_OP_N ? c.n : c.k;
    const int lda = std::max(1, rows_a + c.pad_a), ldb = std::max(1, rows_b + c.pad_b),
              ldc = c.m + c.pad_c;
    std::vector<float> a(static_cast<size_t>(lda) * std::max(cols_a, 1)),
        b(static_cast<size_t>(ldb) * std::max(cols_b, 1)), cm(static_cast<size_t>(ldc) * c.n);
    for (auto& x : a) x = value(rng);
    for (auto& x : b) x = value(rng);
    for (auto& x : cm) x = value(rng);
    // beta = 0: C may hold NaN and must be overwritten without being read (cuBLAS docs).
    if (c.beta == 0.0f) {
      for (auto& x : cm) x = std::numeric_limits<float>::quiet_NaN();
    }
    DeviceBuffer<float> da(a), db(b), dc(cm);
    ASSERT_EQ(cublasSgemm(handle, c.ta, c.tb, c.m, c.n, c.k, &c.alpha, da.const_span().data(), lda,
                          db.const_span().data(), ldb, &c.beta, dc.span().data(), ldc),
              CUBLAS_STATUS_SUCCESS);
    std::vector<float> out;
    ASSERT_EQ(dc.copy_to(out), cudaSuccess);
    for (int col = 0; col < c.n; ++col) {
      for (int row = 0; row < ldc; ++row) {
        const size_t at = static_cast<size_t>(col) * ldc + row;
        if (row >= c.m) {  // padding rows of C are never written
          if (c.beta == 0.0f) {
            EXPECT_TRUE(std::isnan(out[at]));
          } else {
            EXPECT_EQ(out[at], cm[at]);
          }
          continue;
        }
        double sum = 0.0, magnitude = 0.0;
        for (int j = 0; j < c.k; ++j) {
          const double term = op_at(a, lda, c.ta, row, j) * op_at(b, ldb, c.tb, j, col);
          sum += term;
          magnitude += std::abs(term);
        }
        const double c_in = c.beta == 0.0f ? 0.0 : cm[at];
        const double expected = c.alpha * sum + c.beta * c_in;
        // Float accumulation of k products: |error| ≤ γ_{k+2}·(|α|·Σ|a·b| + |β·c|) with
        // γ_n = n·2^-24/(1 − n·2^-24) (Higham, Accuracy and Stability, §3.1).
        const double u = std::ldexp(1.0, -24);
        const double gamma_n = (c.k + 2) * u / (1 - (c.k + 2) * u);
        const double bound = gamma_n * (std::abs(c.alpha) * magnitude + std::abs(c.beta * c_in));
        EXPECT_NEAR(out[at], expected, bound + 1e-30)
            << "op " << c.ta << c.tb << " m " << c.m << " n " << c.n << " k " << c.k << " at ("
            << row << ", " << col << ")";
      }
    }
  }
  SPECLAB_CUBLAS_CHECK(cublasDestroy(handle));
}

TEST(CublasSgemm, BadArgumentsReturnInvalidValue) {
  SPECLAB_SKIP_WITHOUT_GPU();
  cublasHandle_t handle = nullptr;
  SPECLAB_CUBLAS_CHECK(cublasCreate(&handle));
  DeviceBuffer<float> a(std::vector<float>(64, 1.0f)), b(std::vector<float>(64, 1.0f)),
      c(std::vector<float>(64, 0.0f));
  const float one = 1.0f;
  const float* pa = a.const_span().data();
  const float* pb = b.const_span().data();
  float* pc = c.span().data();
  auto call = [&](cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k, int lda, int ldb,
                  int ldc) {
    return cublasSgemm(handle, ta, tb, m, n, k, &one, pa, lda, pb, ldb, &one, pc, ldc);
  };
  EXPECT_EQ(call(CUBLAS_OP_N, CUBLAS_OP_N, 4, 4, 4, 4, 4, 4), CUBLAS_STATUS_SUCCESS);
  EXPECT_EQ(call(CUBLAS_OP_N, CUBLAS_OP_N, -1, 4, 4, 4, 4, 4), CUBLAS_STATUS_INVALID_VALUE);
  EXPECT_EQ(call(CUBLAS_OP_N, CUBLAS_OP_N, 4, -1, 4, 4, 4, 4), CUBLAS_STATUS_INVALID_VALUE);
  EXPECT_EQ(call(CUBLAS_OP_N, CUBLAS_OP_N, 4, 4, -1, 4, 4, 4), CUBLAS_STATUS_INVALID_VALUE);
  // lda ≥ m for op N, ≥ k for op T; ldb ≥ k for op N, ≥ n for op T; ldc ≥ m.
  EXPECT_EQ(call(CUBLAS_OP_N, CUBLAS_OP_N, 5, 2, 3, 4, 3, 5), CUBLAS_STATUS_INVALID_VALUE);
  EXPECT_EQ(call(CUBLAS_OP_T, CUBLAS_OP_N, 5, 2, 3, 2, 3, 5), CUBLAS_STATUS_INVALID_VALUE);
  EXPECT_EQ(call(CUBLAS_OP_T, CUBLAS_OP_N, 5, 2, 3, 3, 3, 5), CUBLAS_STATUS_SUCCESS);
  EXPECT_EQ(call(CUBLAS_OP_N, CUBLAS_OP_N, 5, 2, 3, 5, 2, 5), CUBLAS_STATUS_INVALID_VALUE);
  EXPECT_EQ(call(CUBLAS_OP_N, CUBLAS_OP_T, 5, 2, 3, 5, 1, 5), CUBLAS_STATUS_INVALID_VALUE);
  EXPECT_EQ(call(CUBLAS_OP_N, CUBLAS_OP_T, 5, 2, 3, 5, 2, 5), CUBLAS_STATUS_SUCCESS);
  EXPECT_EQ(call(CUBLAS_OP_N, CUBLAS_OP_N, 5, 2, 3, 5, 3, 4), CUBLAS_STATUS_INVALID_VALUE);
  EXPECT_EQ(call(static_cast<cublasOperation_t>(7), CUBLAS_OP_N, 4, 4, 4, 4, 4, 4),
            CUBLAS_STATUS_INVALID_VALUE);
  EXPECT_EQ(
      cublasSgemm(nullptr, CUBLAS_OP_N, CUBLAS_OP_N, 4, 4, 4, &one, pa, 4, pb, 4, &one, pc, 4),
      CUBLAS_STATUS_NOT_INITIALIZED);
  EXPECT_STREQ(cublasGetStatusName(CUBLAS_STATUS_INVALID_VALUE), "CUBLAS_STATUS_INVALID_VALUE");
  SPECLAB_CUBLAS_CHECK(cublasDestroy(handle));
}

}  // namespace
}  // namespace speclab
