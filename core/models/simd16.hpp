// Sixteen-lane float vectors for the CPU matrix kernels (skinny_gemm, quant_gemm): a GCC vector
// extension that is one AVX-512 register with -march=native and two or four narrower registers
// elsewhere, plus a fused multiply-add that keeps one rounding per step wherever the hardware has
// it, so the kernels that share it round identically.
#pragma once

#include <cstring>

#if defined(__AVX512F__) || defined(__FMA__)
#include <immintrin.h>
#endif

namespace speclab::simd {

using Vec = float __attribute__((vector_size(64)));
constexpr int kLanes = 16;

/// acc += a·b. The library is built with -ffp-contract=off, so a*b+c is not fused; fuse
/// explicitly where the hardware can (twice the throughput once a kernel is compute-bound).
/// By reference, not by value: Vec arguments would change the ABI (and warn) where the library
/// is built without AVX-512.
inline void fma_into(Vec& acc, const Vec& a, const Vec& b) {
#if defined(__AVX512F__)
  acc = (Vec)_mm512_fmadd_ps((__m512)a, (__m512)b, (__m512)acc);
#elif defined(__FMA__)
  __m256 a2[2], b2[2], c2[2];
  std::memcpy(a2, &a, sizeof a);
  std::memcpy(b2, &b, sizeof b);
  std::memcpy(c2, &acc, sizeof acc);
  c2[0] = _mm256_fmadd_ps(a2[0], b2[0], c2[0]);
  c2[1] = _mm256_fmadd_ps(a2[1], b2[1], c2[1]);
  std::memcpy(&acc, c2, sizeof acc);
#else
  acc = a * b + acc;
#endif
}

}  // namespace speclab::simd
