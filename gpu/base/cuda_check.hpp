// Error handling for CUDA calls: SPECLAB_CUDA_CHECK throws speclab::Error with the error name,
// the failing statement, file:line and the current device (docs/architecture.md "Errors").
#pragma once

#include <cuda_runtime_api.h>

#include <string>

#include "core/base/error.hpp"

namespace speclab::gpu {

[[noreturn]] inline void throw_cuda_error(cudaError_t status, const char* statement,
                                          const char* file, int line) {
  int device = -1;
  cudaGetDevice(&device);
  throw Error(std::string(cudaGetErrorName(status)) + " (" + cudaGetErrorString(status) +
              ") from `" + statement + "` at " + file + ":" + std::to_string(line) + " on device " +
              std::to_string(device));
}

/// Number of usable CUDA devices; any error (no driver gives cudaErrorInsufficientDriver, 35)
/// counts as zero devices and is cleared so that later calls do not see it.
inline int device_count() {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess) {
    cudaGetLastError();
    return 0;
  }
  return count;
}

}  // namespace speclab::gpu

#define SPECLAB_CUDA_CHECK(statement)                                                    \
  do {                                                                                   \
    const cudaError_t speclab_status_ = (statement);                                     \
    if (speclab_status_ != cudaSuccess) {                                                \
      ::speclab::gpu::throw_cuda_error(speclab_status_, #statement, __FILE__, __LINE__); \
    }                                                                                    \
  } while (0)
