// core/base/philox.hpp and the fixed-point rules of core/base/rules.hpp.
#include "core/base/philox.hpp"

#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <limits>
#include <set>

#include "core/base/rules.hpp"

namespace speclab {
namespace {

uint32_t raw_philox_word0(std::array<uint32_t, 4> ctr, std::array<uint32_t, 2> key) {
  r123::Philox4x32 rng;
  return rng({{ctr[0], ctr[1], ctr[2], ctr[3]}}, {{key[0], key[1]}})[0];
}

TEST(Philox, KnownAnswerVectors) {
  // Known-answer vectors of Philox4x32-10 published with Random123 (kat_vectors):
  // counter 0, key 0 -> 6627e8d5 ...; counter/key from the digits of pi -> d16cfe09 ...
  EXPECT_EQ(raw_philox_word0({0, 0, 0, 0}, {0, 0}), 0x6627e8d5u);
  EXPECT_EQ(
      raw_philox_word0({0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344}, {0xa4093822, 0x299f31d0}),
      0xd16cfe09u);
}

TEST(Philox, AddressLayoutIsCounterAndKey) {
  // docs/randomness.md addressing: counter (request, step, position, purpose | index << 8), key =
  // seed.
  const RandomAddress a{0x0123456789abcdefull, 11, 22, 3, Purpose::kResidualSample, 5};
  EXPECT_EQ(philox_bits(a),
            raw_philox_word0({11, 22, 3, 3u | (5u << 8)}, {0x89abcdef, 0x01234567}));
}

TEST(Philox, EveryAddressFieldChangesTheBits) {
  const RandomAddress base{42, 1, 2, 3, Purpose::kAcceptTest, 0};
  std::set<uint32_t> seen{philox_bits(base)};
  auto with = [&](auto mutate) {
    RandomAddress a = base;
    mutate(a);
    return philox_bits(a);
  };
  seen.insert(with([](RandomAddress& a) { a.seed = 43; }));
  seen.insert(with([](RandomAddress& a) { a.seed = 42ull | (1ull << 40); }));
  seen.insert(with([](RandomAddress& a) { a.request = 2; }));
  seen.insert(with([](RandomAddress& a) { a.step = 3; }));
  seen.insert(with([](RandomAddress& a) { a.position = 4; }));
  seen.insert(with([](RandomAddress& a) { a.purpose = Purpose::kBonusSample; }));
  seen.insert(with([](RandomAddress& a) { a.index = 1; }));
  EXPECT_EQ(seen.size(), 8u);
}

TEST(Philox, UniformsLieInTheOpenUnitInterval) {
  EXPECT_GT(uniform_from_bits(0), 0.0);
  EXPECT_EQ(uniform_from_bits(0), std::ldexp(1.0, -33));
  EXPECT_LT(uniform_from_bits(0xffffffffu), 1.0);
  EXPECT_EQ(uniform_from_bits(0xffffffffu), 1.0 - std::ldexp(1.0, -33));
}

TEST(Rules, FixedTargetIsFloorOfUniformTimesTotal) {
  // floor(u·total) with u = (2·bits+1)/2^33, checked against exact 128-bit arithmetic written
  // independently (division instead of shifts).
  const uint64_t totals[] = {1, 2, 3, 1000003, (1ull << 58) + 12345, (1ull << 60) - 1};
  const uint32_t bits[] = {0, 1, 0x7fffffffu, 0x80000000u, 0xfffffffeu, 0xffffffffu};
  for (uint64_t total : totals) {
    for (uint32_t b : bits) {
      const unsigned __int128 num = static_cast<unsigned __int128>(2ull * b + 1) * total;
      const uint64_t expected =
          static_cast<uint64_t>(num / (static_cast<unsigned __int128>(1) << 33));
      EXPECT_EQ(fixed_target(b, total), expected) << "bits " << b << " total " << total;
      EXPECT_LT(fixed_target(b, total), total);
    }
  }
}

TEST(Rules, AcceptTestFollowsSpec) {
  // V1: accept iff q(x) > 0 and u·q(x) ≤ p(x).
  EXPECT_TRUE(token_accepts(0.5, 0.4f, 0.2f));    // 0.2 ≤ 0.2
  EXPECT_FALSE(token_accepts(0.51, 0.4f, 0.2f));  // 0.204 > 0.2
  EXPECT_FALSE(token_accepts(0.1, 0.0f, 0.5f));   // q(x) = 0 is never accepted
  EXPECT_TRUE(token_accepts(0.999, 0.3f, 0.3f));  // p ≥ q always accepts
  // V3 with l = 1 is V1; smaller l accepts more.
  EXPECT_EQ(lenient_accepts(0.51, 1.0f, 0.4f, 0.2f), token_accepts(0.51, 0.4f, 0.2f));
  EXPECT_TRUE(lenient_accepts(0.51, 0.5f, 0.4f, 0.2f));  // 0.102 ≤ 0.2
}

TEST(Rules, ResidualWeightIsPositivePartOfDifference) {
  // 0.25 · 2^58 = 2^56 exactly.
  EXPECT_EQ(residual_fixed(0.5f, 0.25f, 1.0f), uint64_t{1} << 56);
  EXPECT_EQ(residual_fixed(0.25f, 0.5f, 1.0f), 0u);
  EXPECT_EQ(residual_fixed(0.5f, 0.5f, 0.5f), uint64_t{1} << 56);
  EXPECT_EQ(to_fixed(std::nanf("")), 0u);
  EXPECT_EQ(to_fixed(-0.5f), 0u);
  // The smallest normal float, 2^-126, is below the 2^-58 resolution and truncates to 0;
  // 2^-58 itself is one unit.
  EXPECT_EQ(to_fixed(std::ldexp(1.0f, -126)), 0u);
  EXPECT_EQ(to_fixed(std::ldexp(1.0f, -58)), 1u);
}

TEST(Rules, ToFixedIsTheExactConversionForEveryFloat) {
  // fixed_from_bits builds floor(w · 2^58) from the float's bits (what to_fixed runs where the ISA
  // has no float → uint64 vector conversion); it must equal the conversion itself for every float
  // to_fixed keeps: all 1,107,296,257 bit patterns from +0 to 32 (the clamp). Then to_fixed, on
  // whichever path this build takes, at the clamped and the zeroed values.
  uint64_t mismatches = 0;
  uint32_t first = 0;
  for (uint32_t bits = 0; bits <= std::bit_cast<uint32_t>(32.0f); ++bits) {
    const float w = std::bit_cast<float>(bits);
    const uint64_t exact = static_cast<uint64_t>(w * kFixedScale);
    if ((fixed_from_bits(w) != exact || to_fixed(w) != exact) && mismatches++ == 0) first = bits;
  }
  EXPECT_EQ(mismatches, 0u) << "first at bits 0x" << std::hex << first;
  EXPECT_EQ(to_fixed(32.0f), uint64_t{1} << 63);
  EXPECT_EQ(to_fixed(1e30f), uint64_t{1} << 63);
  EXPECT_EQ(to_fixed(std::numeric_limits<float>::infinity()), uint64_t{1} << 63);
  EXPECT_EQ(to_fixed(-std::numeric_limits<float>::infinity()), 0u);
  EXPECT_EQ(to_fixed(-0.0f), 0u);
  EXPECT_EQ(to_fixed(std::numeric_limits<float>::denorm_min()), 0u);
  EXPECT_EQ(to_fixed(1.0f), uint64_t{1} << 58);
  EXPECT_EQ(to_fixed(1.5f * std::ldexp(1.0f, -58)), 1u);  // truncation, not rounding
  EXPECT_EQ(to_fixed(std::nextafter(1.0f, 0.0f)), (uint64_t{1} << 58) - (uint64_t{1} << 34));
}

}  // namespace
}  // namespace speclab
