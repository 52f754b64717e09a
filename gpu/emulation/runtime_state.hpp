// Error state shared by the emulated runtime calls and the emulated launches (gpu/emulation/).
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <string>

namespace speclab::emulation::detail {

/// The error cudaGetLastError returns (and clears) next, as a failed launch sets it.
void set_last_error(cudaError_t error);
/// A failure while a grid ran: the next synchronising call returns cudaErrorLaunchFailure once.
void record_execution_failure(const std::string& message);
/// Whether [pointer, pointer + bytes) lies inside one cudaMalloc allocation.
bool is_device_range(const void* pointer, size_t bytes);
/// The largest dynamic shared memory the launch of `kernel` may request.
size_t dynamic_shared_limit(const void* kernel);

}  // namespace speclab::emulation::detail
