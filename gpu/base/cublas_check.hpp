// SPECLAB_CUBLAS_CHECK: throws speclab::Error with the cuBLAS status name, the failing statement,
// file:line and the current device (docs/architecture.md "Errors"), as SPECLAB_CUDA_CHECK does for
// the runtime.
#pragma once

#include <cublas_v2.h>

#include <string>

#include "gpu/base/cuda_check.hpp"

namespace speclab::gpu {

[[noreturn]] inline void throw_cublas_error(cublasStatus_t status, const char* statement,
                                            const char* file, int line) {
  int device = -1;
  cudaGetDevice(&device);
  throw Error(std::string(cublasGetStatusName(status)) + " (" + cublasGetStatusString(status) +
              ") from `" + statement + "` at " + file + ":" + std::to_string(line) + " on device " +
              std::to_string(device));
}

}  // namespace speclab::gpu

#define SPECLAB_CUBLAS_CHECK(statement)                                                    \
  do {                                                                                     \
    const cublasStatus_t speclab_status_ = (statement);                                    \
    if (speclab_status_ != CUBLAS_STATUS_SUCCESS) {                                        \
      ::speclab::gpu::throw_cublas_error(speclab_status_, #statement, __FILE__, __LINE__); \
    }                                                                                      \
  } while (0)
