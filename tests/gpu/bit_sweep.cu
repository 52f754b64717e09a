// The device side of the bit-equality sweeps (tests/gpu/bit_sweep.hpp): each thread evaluates the
// device's own functions — gpu::exp_nonpositive, the fp16/bf16 loads of the softmax kernel,
// to_fixed, residual_fixed, block_residual_fixed of core/base/rules.hpp compiled by nvcc with
// --fmad=false — and a CTA sums the checksum terms of its inputs.
#include "tests/gpu/bit_sweep.hpp"

#if !defined(SPECLAB_SIMT_EMULATION)
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#endif

#include "core/base/rules.hpp"
#include "gpu/sampling/logits.hpp"
#include "gpu/base/simt.cuh"

namespace speclab::testing {
namespace {

constexpr unsigned kThreads = 1024;

// How the softmax kernel turns stored half bits into a float: the intrinsics on the device, the
// software form (gpu/sampling/logits.hpp) in the emulation.
__device__ inline float device_half_to_float(uint16_t bits) {
#if defined(SPECLAB_SIMT_EMULATION)
  return gpu::half_bits_to_float(bits);
#else
  return __half2float(__ushort_as_half(bits));
#endif
}

__device__ inline float device_bfloat16_to_float(uint16_t bits) {
#if defined(SPECLAB_SIMT_EMULATION)
  return gpu::bfloat16_bits_to_float(bits);
#else
  return __bfloat162float(__ushort_as_bfloat16(bits));
#endif
}

// A NaN's payload is not part of the contract (a NaN logit only sets a status bit): one pattern.
__device__ inline uint64_t float_result(float value) {
  return value != value ? 0x7fc00000u : gpu::bits_from_float(value);
}

__device__ inline uint64_t evaluate(const BitSweep& s, uint64_t k) {
  uint32_t p_bits = 0, q_bits = 0;
  sweep_operands(s, k, &p_bits, &q_bits);
  const float p = gpu::float_from_bits(p_bits), q = gpu::float_from_bits(q_bits);
  switch (s.rule) {
    case BitRule::kExpNonpositive:
      return gpu::bits_from_float(gpu::exp_nonpositive(p));
    case BitRule::kHalfToFloat:
      return float_result(device_half_to_float(static_cast<uint16_t>(p_bits)));
    case BitRule::kBFloat16ToFloat:
      return float_result(device_bfloat16_to_float(static_cast<uint16_t>(p_bits)));
    case BitRule::kToFixed:
      return to_fixed(p);
    case BitRule::kResidual:
      return residual_fixed(p, q, s.scalar);
    case BitRule::kBlockResidual:
      return block_residual_fixed(s.scalar, p, q);
  }
  return 0;
}

__global__ void __launch_bounds__(kThreads)
    bit_sweep_kernel(BitSweep s, uint64_t base, uint64_t* checksums, uint64_t* values) {
  SPECLAB_STATIC_SHARED(uint64_t[kThreads / 32], warp_sums);
  const uint64_t begin = base + static_cast<uint64_t>(blockIdx.x) * s.per_block;
  const uint64_t end = begin + s.per_block < s.count ? begin + s.per_block : s.count;
  uint64_t sum = 0;
  for (uint64_t k = begin + threadIdx.x; k < end; k += kThreads) {
    const uint64_t result = evaluate(s, k);
    sum += checksum_term(k, result);
    if (values != nullptr) values[k - base] = result;
  }
  for (int offset = 16; offset > 0; offset >>= 1) sum += __shfl_down_sync(0xffffffffu, sum, offset);
  if (threadIdx.x % 32 == 0) warp_sums[threadIdx.x / 32] = sum;
  __syncthreads();
  if (threadIdx.x == 0) {
    uint64_t total = 0;
    for (unsigned w = 0; w < kThreads / 32; ++w) total += warp_sums[w];
    checksums[blockIdx.x] = total;
  }
}

}  // namespace

cudaError_t launch_bit_sweep(const BitSweep& s, uint64_t base, uint64_t* checksums,
                             uint64_t* values, cudaStream_t stream) {
  const uint64_t left = s.count > base ? s.count - base : 0;
  const uint64_t blocks = (left + s.per_block - 1) / s.per_block;
  if (blocks == 0) return cudaSuccess;
  return gpu::launch_kernel(bit_sweep_kernel, dim3(static_cast<unsigned>(blocks)), dim3(kThreads),
                            0, stream, s, base, checksums, values);
}

}  // namespace speclab::testing
