// Small deterministic hashes for seeds and generated weights (never for security).
#pragma once

#include <cstdint>

namespace speclab {

/// splitmix64's finaliser: a bijective 64-bit mixer with full avalanche.
inline uint64_t mix64(uint64_t x) {
  x ^= x >> 30;
  x *= 0xbf58476d1ce4e5b9ULL;
  x ^= x >> 27;
  x *= 0x94d049bb133111ebULL;
  x ^= x >> 31;
  return x;
}

}  // namespace speclab
