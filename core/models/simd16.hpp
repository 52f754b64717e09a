// Sixteen-lane float vectors for the CPU matrix kernels (skinny_gemm, the attention of
// LlamaModel): 16 / kNativeFloats registers of the build's widest float vector
// (core/base/simd_width.hpp: one AVX-512 register, two AVX2 ones), plus a fused multiply-add that
// keeps one rounding per step wherever the hardware has it, so the kernels that share it round
// identically at every width.
#pragma once

#include <cstring>

#include "core/base/simd_width.hpp"

#if defined(__AVX512F__) || defined(__FMA__)
#include <immintrin.h>
#endif

namespace speclab::simd {

inline constexpr int kLanes = 16;
inline constexpr int kParts = kLanes / kNativeFloats;  // native registers per Vec

/// Lane i of the 16 is lane i % kNativeFloats of part[i / kNativeFloats].
struct Vec {
  NativeFloats part[kParts];
};

// Loads and stores part by part: a copy of the whole struct would go through the stack.
inline Vec load(const float* p) {
  Vec v;
  for (int k = 0; k < kParts; ++k) std::memcpy(&v.part[k], p + k * kNativeFloats, sizeof v.part[k]);
  return v;
}

inline void store(float* p, const Vec& v) {
  for (int k = 0; k < kParts; ++k) {
    const NativeFloats x = v.part[k];
    std::memcpy(p + k * kNativeFloats, &x, sizeof x);
  }
}

/// Every lane s (s − 0 is s exactly, and compiles to one broadcast; 0 + s would not keep −0).
inline Vec broadcast(float s) {
  Vec v;
  for (int k = 0; k < kParts; ++k) v.part[k] = s - NativeFloats{};
  return v;
}

inline float lane(const Vec& v, int i) { return v.part[i / kNativeFloats][i % kNativeFloats]; }

/// y += w·x lane by lane, unfused (the library is built with -ffp-contract=off).
inline void axpy_into(Vec& y, float w, const Vec& x) {
  for (int k = 0; k < kParts; ++k) y.part[k] += w * x.part[k];
}

/// acc += a·b. The library is built with -ffp-contract=off, so a*b+c is not fused; fuse
/// explicitly where the hardware can (twice the throughput once a kernel is compute-bound).
inline void fma_into(Vec& acc, const Vec& a, const Vec& b) {
  for (int k = 0; k < kParts; ++k) {
#if defined(__AVX512F__)
    acc.part[k] =
        (NativeFloats)_mm512_fmadd_ps((__m512)a.part[k], (__m512)b.part[k], (__m512)acc.part[k]);
#elif defined(__FMA__)
    acc.part[k] =
        (NativeFloats)_mm256_fmadd_ps((__m256)a.part[k], (__m256)b.part[k], (__m256)acc.part[k]);
#else
    acc.part[k] = a.part[k] * b.part[k] + acc.part[k];
#endif
  }
}

}  // namespace speclab::simd
