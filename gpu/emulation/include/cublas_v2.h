// The part of the cuBLAS v2 API that speclab uses, as the SIMT emulation provides it (docs/testing.md
// "GPU tests without a GPU"): handles, streams and single-precision GEMM over the emulation's
// host-memory device. It stands in for the toolkit's header in the gpu-emu build only; status
// and operation values equal the real ones (cublas_api.h), semantics follow the cuBLAS
// documentation (column-major storage, op(A) and op(B), leading dimensions, alpha and beta).
#pragma once

#include <cuda_runtime_api.h>

#if !defined(SPECLAB_SIMT_EMULATION)
#error "gpu/emulation/include/cublas_v2.h is the emulation's shim (-DSPECLAB_SIMT_EMULATION)"
#endif

/// Same numeric values as cuBLAS 13 (cublas_api.h).
typedef enum {
  CUBLAS_STATUS_SUCCESS = 0,
  CUBLAS_STATUS_NOT_INITIALIZED = 1,
  CUBLAS_STATUS_ALLOC_FAILED = 3,
  CUBLAS_STATUS_INVALID_VALUE = 7,
  CUBLAS_STATUS_ARCH_MISMATCH = 8,
  CUBLAS_STATUS_MAPPING_ERROR = 11,
  CUBLAS_STATUS_EXECUTION_FAILED = 13,
  CUBLAS_STATUS_INTERNAL_ERROR = 14,
  CUBLAS_STATUS_NOT_SUPPORTED = 15,
  CUBLAS_STATUS_LICENSE_ERROR = 16
} cublasStatus_t;

typedef enum {
  CUBLAS_OP_N = 0,
  CUBLAS_OP_T = 1,
  CUBLAS_OP_C = 2,
  CUBLAS_OP_HERMITAN = 2,
  CUBLAS_OP_CONJG = 3
} cublasOperation_t;

typedef struct cublasContext* cublasHandle_t;

cublasStatus_t cublasCreate(cublasHandle_t* handle);
cublasStatus_t cublasDestroy(cublasHandle_t handle);
cublasStatus_t cublasSetStream(cublasHandle_t handle, cudaStream_t stream);
cublasStatus_t cublasGetStream(cublasHandle_t handle, cudaStream_t* stream);
const char* cublasGetStatusName(cublasStatus_t status);
const char* cublasGetStatusString(cublasStatus_t status);

/// C = alpha·op(A)·op(B) + beta·C, column-major: op(A) is m×k, op(B) k×n, C m×n; A is m×k
/// (lda ≥ max(1, m)) for CUBLAS_OP_N and k×m (lda ≥ max(1, k)) otherwise, B likewise with
/// (k, n) and ldb; ldc ≥ max(1, m). alpha and beta are host pointers (the default pointer mode).
/// beta = 0 sets C without reading it. Returns CUBLAS_STATUS_INVALID_VALUE for a negative size,
/// a leading dimension too small, an unknown operation or a null scalar, and
/// CUBLAS_STATUS_NOT_INITIALIZED for a null handle.
cublasStatus_t cublasSgemm(cublasHandle_t handle, cublasOperation_t transa,
                           cublasOperation_t transb, int m, int n, int k, const float* alpha,
                           const float* A, int lda, const float* B, int ldb, const float* beta,
                           float* C, int ldc);
