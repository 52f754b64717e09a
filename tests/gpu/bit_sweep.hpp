// Exhaustive and dense sweeps of the scalar rules that the device must compute bit for bit as core
// does (tests/gpu/bit_equality_test.cpp): the sweep's inputs as a function of an index, shared by
// the kernel (tests/gpu/bit_sweep.cu) and the host side, and the per-block checksum both form.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "core/base/hd.hpp"

namespace speclab::testing {

/// The rule a sweep evaluates.
enum class BitRule : int32_t {
  kExpNonpositive,   ///< gpu::exp_nonpositive(x)
  kHalfToFloat,      ///< fp16 bits → float as the softmax kernel loads them
  kBFloat16ToFloat,  ///< bf16 bits → float as the softmax kernel loads them
  kToFixed,          ///< to_fixed(x)
  kResidual,         ///< residual_fixed(p, q, scalar = l)
  kBlockResidual,    ///< block_residual_fixed(scalar = w, p, q)
};

/// Input k of a sweep. One operand: bits first + k·stride (a == null) or a[k]. Two operands
/// (b != null): p = a[k / nb] and q = b[k % nb], or, when `diagonal`, q's bits = p's bits + b[k %
/// nb] (as a signed offset): the near-equal pairs where p − q cancels.
struct BitSweep {
  BitRule rule = BitRule::kExpNonpositive;
  const uint32_t* a = nullptr;
  uint32_t first = 0, stride = 1;
  const uint32_t* b = nullptr;
  uint64_t nb = 0;
  int32_t diagonal = 0;
  float scalar = 1.0f;
  uint64_t count = 0;      ///< inputs
  uint64_t per_block = 0;  ///< inputs per checksum (one CTA each)
};

SPECLAB_HD inline void sweep_operands(const BitSweep& s, uint64_t k, uint32_t* p, uint32_t* q) {
  if (s.b == nullptr) {
    *p = s.a != nullptr ? s.a[k] : static_cast<uint32_t>(s.first + k * s.stride);
    *q = 0;
    return;
  }
  *p = s.a[k / s.nb];
  const uint32_t other = s.b[k % s.nb];
  *q = s.diagonal != 0 ? *p + other : other;
}

/// A bijection of 64-bit words (splitmix64's finaliser).
SPECLAB_HD inline uint64_t mix64(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

/// Input k's term of its block's checksum: a bijection of the result for each k, so a block
/// whose results differ anywhere in one place has another checksum.
SPECLAB_HD inline uint64_t checksum_term(uint64_t k, uint64_t result) {
  return mix64(result ^ mix64(k + 0x9e3779b97f4a7c15ull));
}

/// One CTA of 1024 threads per block of `s.per_block` inputs from `base`: checksums[block] = Σ
/// checksum_term(k, result_k), and values[k − base] = result_k when `values` is not null. All
/// pointers are device memory. Returns the launch status.
cudaError_t launch_bit_sweep(const BitSweep& s, uint64_t base, uint64_t* checksums,
                             uint64_t* values, cudaStream_t stream);

}  // namespace speclab::testing
