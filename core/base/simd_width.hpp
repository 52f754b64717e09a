// The widest float vector of the build's target, for loops that must run at the ISA's width: 16
// lanes with AVX-512, 8 with AVX (AVX2, x86-64-v3), 4 otherwise. GCC vector types wider than the
// target's registers compile, but have no register class: they live on the stack, and selects,
// conversions and lane reads on them become scalar code, so a 64-byte vector is several times
// slower on AVX2 than two 32-byte ones. Kernels that need a fixed lane count (the normaliser's 16
// lanes, the 16-row panels) hold it as 16 / kNativeFloats native vectors side by side: each lane
// then sees the same operations in the same order at every width, so results are bit-identical.
#pragma once

#include <cstddef>
#include <cstdint>

namespace speclab::simd {

#if defined(__AVX512F__)
inline constexpr int kNativeFloats = 16;
#elif defined(__AVX__)
inline constexpr int kNativeFloats = 8;
#else
inline constexpr int kNativeFloats = 4;
#endif

using NativeFloats = float __attribute__((vector_size(kNativeFloats * sizeof(float))));
using NativeInts = int32_t __attribute__((vector_size(kNativeFloats * sizeof(int32_t))));

}  // namespace speclab::simd
