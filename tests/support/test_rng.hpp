// A tiny deterministic generator for test inputs (weights, quantisation blocks): the same numbers
// on every platform and library version, which std's distributions do not promise.
#pragma once

#include <cstdint>

namespace speclab::testing {

struct TestRng {
  uint64_t s;
  /// 31 bits of a 64-bit linear congruential generator (Knuth's MMIX constants).
  uint64_t next() {
    s = s * 6364136223846793005ULL + 1442695040888963407ULL;
    return s >> 33;
  }
  /// Uniform on [lo, hi) with 24-bit resolution (exact in float).
  float uniform(float lo, float hi) {
    return lo + (hi - lo) * static_cast<float>(next() % (1u << 24)) * 0x1p-24f;
  }
  /// A normal fp16 of random sign with exponent 2^-7 … 2^3 (a quantisation scale's range).
  uint16_t half() {
    const auto sign = static_cast<uint16_t>((next() & 1) << 15);
    const auto exponent = static_cast<uint16_t>((8 + next() % 11) << 10);
    return static_cast<uint16_t>(sign | exponent | (next() & 0x3ff));
  }
};

}  // namespace speclab::testing
