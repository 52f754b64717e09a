// The emulated cuBLAS (gpu/emulation/include/cublas_v2.h): a handle remembers its stream, and
// Sgemm is the reference triple loop over column-major storage, run synchronously like every
// emulated call. Each C entry accumulates its k products in float in increasing k, as the
// reference BLAS does; the device library sums in another order, so callers compare within a
// float tolerance, never bit for bit.
// The matrices must lie in device allocations (the emulation's map of cudaMalloc memory): a host
// matrix is what the device's GEMM kernel faults on, so it leaves the sticky illegal-address error
// and the message naming the matrix, and C is not written. alpha and beta are read on the host
// (CUBLAS_POINTER_MODE_HOST, the default): a device pointer there is rejected.
#include <cublas_v2.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <string>

#include "gpu/emulation/runtime_state.hpp"
#include "gpu/emulation/simt.hpp"

struct cublasContext {
  cudaStream_t stream = nullptr;
};

namespace {

bool valid_operation(cublasOperation_t op) {
  return op == CUBLAS_OP_N || op == CUBLAS_OP_T || op == CUBLAS_OP_C;
}

// Element (row, col) of op(X) where X is column-major with leading dimension ld. For real
// matrices the conjugate transpose is the transpose.
inline float op_at(const float* x, int ld, cublasOperation_t op, int64_t row, int64_t col) {
  return op == CUBLAS_OP_N ? x[col * ld + row] : x[row * ld + col];
}

// Whether the column-major rows × cols matrix at x (leading dimension ld) is device memory;
// otherwise records the fault a device would report.
bool device_matrix(const char* name, const float* x, int64_t rows, int64_t cols, int ld) {
  if (rows == 0 || cols == 0) return true;
  const auto bytes =
      static_cast<size_t>(((cols - 1) * ld + rows) * static_cast<int64_t>(sizeof(float)));
  if (speclab::emulation::detail::is_device_range(x, bytes)) return true;
  char text[160];
  std::snprintf(text, sizeof text, "cublasSgemm: %s (%lld x %lld, leading dimension %d) at %p",
                name, static_cast<long long>(rows), static_cast<long long>(cols), ld,
                static_cast<const void*>(x));
  std::string kind = speclab::emulation::detail::host_memory_kind(reinterpret_cast<uintptr_t>(x));
  speclab::emulation::detail::record_execution_failure(
      std::string(text) + " is not inside one device allocation (" +
          (kind.empty() ? std::string("past its end or unknown") : kind) +
          "): the device's GEMM kernel faults on it (illegal address)",
      cudaErrorIllegalAddress);
  return false;
}

}  // namespace

cublasStatus_t cublasCreate(cublasHandle_t* handle) {
  if (handle == nullptr) return CUBLAS_STATUS_INVALID_VALUE;
  *handle = new cublasContext{};
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasDestroy(cublasHandle_t handle) {
  if (handle == nullptr) return CUBLAS_STATUS_NOT_INITIALIZED;
  delete handle;
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasSetStream(cublasHandle_t handle, cudaStream_t stream) {
  if (handle == nullptr) return CUBLAS_STATUS_NOT_INITIALIZED;
  handle->stream = stream;
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasGetStream(cublasHandle_t handle, cudaStream_t* stream) {
  if (handle == nullptr) return CUBLAS_STATUS_NOT_INITIALIZED;
  if (stream == nullptr) return CUBLAS_STATUS_INVALID_VALUE;
  *stream = handle->stream;
  return CUBLAS_STATUS_SUCCESS;
}

const char* cublasGetStatusName(cublasStatus_t status) {
  switch (status) {
    case CUBLAS_STATUS_SUCCESS:
      return "CUBLAS_STATUS_SUCCESS";
    case CUBLAS_STATUS_NOT_INITIALIZED:
      return "CUBLAS_STATUS_NOT_INITIALIZED";
    case CUBLAS_STATUS_ALLOC_FAILED:
      return "CUBLAS_STATUS_ALLOC_FAILED";
    case CUBLAS_STATUS_INVALID_VALUE:
      return "CUBLAS_STATUS_INVALID_VALUE";
    case CUBLAS_STATUS_ARCH_MISMATCH:
      return "CUBLAS_STATUS_ARCH_MISMATCH";
    case CUBLAS_STATUS_MAPPING_ERROR:
      return "CUBLAS_STATUS_MAPPING_ERROR";
    case CUBLAS_STATUS_EXECUTION_FAILED:
      return "CUBLAS_STATUS_EXECUTION_FAILED";
    case CUBLAS_STATUS_INTERNAL_ERROR:
      return "CUBLAS_STATUS_INTERNAL_ERROR";
    case CUBLAS_STATUS_NOT_SUPPORTED:
      return "CUBLAS_STATUS_NOT_SUPPORTED";
    case CUBLAS_STATUS_LICENSE_ERROR:
      return "CUBLAS_STATUS_LICENSE_ERROR";
  }
  return "CUBLAS_STATUS_UNKNOWN";
}

const char* cublasGetStatusString(cublasStatus_t status) {
  switch (status) {
    case CUBLAS_STATUS_SUCCESS:
      return "success";
    case CUBLAS_STATUS_NOT_INITIALIZED:
      return "the library was not initialized";
    case CUBLAS_STATUS_INVALID_VALUE:
      return "an invalid numeric value was used as an argument";
    default:
      return cublasGetStatusName(status);
  }
}

cublasStatus_t cublasSgemm(cublasHandle_t handle, cublasOperation_t transa,
                           cublasOperation_t transb, int m, int n, int k, const float* alpha,
                           const float* A, int lda, const float* B, int ldb, const float* beta,
                           float* C, int ldc) {
  if (handle == nullptr) return CUBLAS_STATUS_NOT_INITIALIZED;
  if (!valid_operation(transa) || !valid_operation(transb) || m < 0 || n < 0 || k < 0) {
    return CUBLAS_STATUS_INVALID_VALUE;
  }
  if (lda < std::max(1, transa == CUBLAS_OP_N ? m : k) ||
      ldb < std::max(1, transb == CUBLAS_OP_N ? k : n) || ldc < std::max(1, m)) {
    return CUBLAS_STATUS_INVALID_VALUE;
  }
  if (alpha == nullptr || beta == nullptr) return CUBLAS_STATUS_INVALID_VALUE;
  using speclab::emulation::detail::is_device_address;
  if (is_device_address(reinterpret_cast<uintptr_t>(alpha)) ||
      is_device_address(reinterpret_cast<uintptr_t>(beta))) {
    std::fprintf(stderr,
                 "speclab SIMT emulation: cublasSgemm: alpha %p or beta %p is device memory, but "
                 "the pointer mode is host (the host would read it)\n",
                 static_cast<const void*>(alpha), static_cast<const void*>(beta));
    return CUBLAS_STATUS_INVALID_VALUE;
  }
  // After a fault the context is unusable, as on a device.
  if (speclab::emulation::detail::sticky_error() != cudaSuccess) {
    return CUBLAS_STATUS_EXECUTION_FAILED;
  }
  if (m == 0 || n == 0) return CUBLAS_STATUS_SUCCESS;
  const float a = *alpha, b = *beta;
  const bool products = a != 0.0f && k > 0;
  // The device launches its GEMM and returns; the fault surfaces at the next runtime call.
  if ((products &&
       (!device_matrix("A", A, transa == CUBLAS_OP_N ? m : k, transa == CUBLAS_OP_N ? k : m, lda) ||
        !device_matrix("B", B, transb == CUBLAS_OP_N ? k : n, transb == CUBLAS_OP_N ? n : k,
                       ldb))) ||
      !device_matrix("C", C, m, n, ldc)) {
    return CUBLAS_STATUS_SUCCESS;
  }
  // alpha and beta are read now (host pointer mode), as a device GEMM reads them at the call.
  const auto gemm = [=] {
    for (int64_t col = 0; col < n; ++col) {
      for (int64_t row = 0; row < m; ++row) {
        float sum = 0.0f;
        if (products) {
          for (int64_t j = 0; j < k; ++j) {
            sum += op_at(A, lda, transa, row, j) * op_at(B, ldb, transb, j, col);
          }
        }
        float& c = C[col * ldc + row];
        c = b == 0.0f ? a * sum : a * sum + b * c;
      }
    }
    return cudaSuccess;
  };
  // On the legacy stream during a capture the GEMM's kernel cannot be launched.
  return speclab::emulation::detail::enqueue(handle->stream, "cublasSgemm", gemm) == cudaSuccess
             ? CUBLAS_STATUS_SUCCESS
             : CUBLAS_STATUS_EXECUTION_FAILED;
}
