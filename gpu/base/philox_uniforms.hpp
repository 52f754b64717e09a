// Philox uniforms on the device (docs/randomness.md): the same core/base/philox.hpp compiled by
// nvcc, so device and host produce identical bits for identical addresses.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "core/base/philox.hpp"

namespace speclab::gpu {

/// bits[i] = philox_bits(addresses[i]) for i < n, on `stream`. Both pointers are device memory.
/// Returns the launch status; never synchronises.
cudaError_t philox_bits(const RandomAddress* addresses, uint32_t* bits, int64_t n,
                        cudaStream_t stream);

}  // namespace speclab::gpu
