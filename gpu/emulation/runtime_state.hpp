// Error state and memory map shared by the emulated runtime calls, the emulated launches and the
// emulated cuBLAS (gpu/emulation/).
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>
#include <string>

namespace speclab::emulation::detail {

/// The error cudaGetLastError returns (and clears) next, as a failed launch sets it.
void set_last_error(cudaError_t error);
/// A failure while a grid ran (or a device-side fault such as a host pointer dereferenced by a
/// kernel or by cuBLAS): `error` becomes sticky, as on a device after a kernel fault — every later
/// runtime call that needs the context returns it, until clear_sticky_error().
void record_execution_failure(const std::string& message, cudaError_t error);
/// The sticky error, or cudaSuccess.
cudaError_t sticky_error();
/// Whether [pointer, pointer + bytes) lies inside one cudaMalloc allocation.
bool is_device_range(const void* pointer, size_t bytes);
/// Whether `address` lies inside a cudaMalloc allocation or one past its end (what a span over
/// its last elements ends at).
bool is_device_address(uintptr_t address);
/// What host memory `address` points into ("heap", "stack", "global" or a mapping's name), or
/// empty when it is no host object's address (a device allocation is never one).
std::string host_memory_kind(uintptr_t address);
/// The demangled name of the function at `address` (a kernel), or its address in hex.
std::string function_name(const void* address);
/// The largest dynamic shared memory the launch of `kernel` may request.
size_t dynamic_shared_limit(const void* kernel);

}  // namespace speclab::emulation::detail
