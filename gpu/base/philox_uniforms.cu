// Device-side Philox bits from core/base/philox.hpp (the one header shared with the CPU reference).
#include "gpu/base/philox_uniforms.hpp"
#include "gpu/base/simt.cuh"

namespace speclab::gpu {
namespace {

__global__ void philox_bits_kernel(const RandomAddress* addresses, uint32_t* bits, int64_t n) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < n) bits[i] = speclab::philox_bits(addresses[i]);
}

}  // namespace

cudaError_t philox_bits(const RandomAddress* addresses, uint32_t* bits, int64_t n,
                        cudaStream_t stream) {
  if (n <= 0) return cudaSuccess;
  constexpr int kThreads = 256;
  const int64_t blocks = (n + kThreads - 1) / kThreads;
  return launch_kernel(philox_bits_kernel, dim3(static_cast<unsigned>(blocks)), dim3(kThreads), 0,
                       stream, addresses, bits, n);
}

}  // namespace speclab::gpu
