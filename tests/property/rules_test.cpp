// The scalar rules of core/base/rules.hpp pinned in exact rational arithmetic: the accept tests
// compare the double product u·q with p, the residual weights are the float difference p − l·q
// (each operation correctly rounded), and the fixed point is floor(w·2^58). The CPU and device
// builds take these rules from one header, so a cross-check between them cannot see a change of
// precision; and the law moves only by rounding, so no statistical test can either. Here each
// expected outcome is derived from the inputs as rationals, rounded to double or float by a
// nearest-value search written in this file, at near-tie inputs where a float and a double
// evaluation decide differently.
#include "core/base/rules.hpp"

#include <gtest/gtest.h>
#include <rapidcheck.h>
#include <rapidcheck/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>

#include "core/exact/exact.hpp"  // exact::Q, GMP rationals

namespace speclab {
namespace {

using exact::Q;

Q exact_value(double x) { return Q(x); }  // GMP's mpq_set_d is exact

// The value of type F nearest to x ≥ 0, ties to the even significand: the candidates around a
// truncated conversion compared exactly.
template <class F>
F nearest(const Q& x) {
  const F start = static_cast<F>(x.convert_to<double>());
  F best = start;
  for (F c : {std::nextafter(start, F{0}), start, std::nextafter(start, F{2})}) {
    const Q d = abs(Q(exact_value(c) - x)), best_d = abs(Q(exact_value(best) - x));
    if (d < best_d) {
      best = c;
    } else if (d == best_d && c != best) {
      using Bits = std::conditional_t<sizeof(F) == 4, uint32_t, uint64_t>;
      if ((std::bit_cast<Bits>(c) & 1u) == 0) best = c;
    }
  }
  return best;
}

// floor(x) for x ≥ 0 as an unsigned 64-bit integer.
uint64_t floor_u64(const Q& x) {
  const boost::multiprecision::mpz_int n =
      boost::multiprecision::numerator(x) / boost::multiprecision::denominator(x);
  return n.convert_to<uint64_t>();
}

const Q kTwoTo58 = Q(boost::multiprecision::mpz_int(1) << 58);

uint64_t expected_fixed(float w) {
  if (!(w > 0.0f)) return 0;  // NaN and non-positive weights carry no mass
  return floor_u64(Q(exact_value(std::min(w, 32.0f)) * kTwoTo58));
}

// The uniforms the verifiers draw: (bits + 1/2) / 2^32, exact in double.
double uniform_of(uint32_t bits) { return (static_cast<double>(bits) + 0.5) * 0x1p-32; }

// A probability in (0, 1]: a random 24-bit significand at a random scale down to 2^-20.
float gen_probability() {
  const auto significand = *rc::gen::inRange<uint32_t>(1u << 23, 1u << 24);
  const int scale = *rc::gen::inRange(-20, 1);
  return std::min(1.0f, std::ldexp(static_cast<float>(significand), scale - 24));
}

// p near u·q: the float nearest the exact product, or one of its neighbours.
float gen_near_tie(double u, float q) {
  const float p = nearest<float>(Q(exact_value(u) * exact_value(q)));
  const int nudge = *rc::gen::inRange(-1, 2);
  return nudge == 0 ? p : std::nextafter(p, nudge < 0 ? 0.0f : 2.0f);
}

RC_GTEST_PROP(RulesProperty, AcceptTestComparesTheDoubleProduct, ()) {
  const double u = uniform_of(*rc::gen::arbitrary<uint32_t>());
  const float q = gen_probability();
  const float p = gen_near_tie(u, q);
  // The rule: the product u·q rounded to double, then compared with p.
  const bool expected =
      exact_value(nearest<double>(Q(exact_value(u) * exact_value(q)))) <= exact_value(p);
  RC_ASSERT(token_accepts(u, q, p) == expected);
  RC_ASSERT(lenient_accepts(u, 1.0f, q, p) == expected);
}

RC_GTEST_PROP(RulesProperty, LenientTestComparesTheDoubleProducts, ()) {
  const double u = uniform_of(*rc::gen::arbitrary<uint32_t>());
  const float q = gen_probability();
  const float l = *rc::gen::element(0.5f, 0.9f, 0.3f);
  const double ul = nearest<double>(Q(exact_value(u) * exact_value(l)));
  const float p = gen_near_tie(ul, q);
  const bool expected =
      exact_value(nearest<double>(Q(exact_value(ul) * exact_value(q)))) <= exact_value(p);
  RC_ASSERT(lenient_accepts(u, l, q, p) == expected);
}

// u = 1/2 + 2^-33 (bits = 2^31) and q = 1 − 2^-24, the largest float below 1: the exact product
// is 1/2 − 2^-25 + 2^-33 − 2^-57. Its nearest double drops only the 2^-57 (the spacing of doubles
// in [1/4, 1/2) is 2^-54), so the double rule compares 1/2 − 2^-25 + 2^-33 with p. The float
// p = 1/2 − 2^-25 (the float nearest the product: floats there are 2^-25 apart) is below it:
// rejected. In float, u rounds to 1/2 (spacing 2^-24 above 1/2) and 1/2·q = 1/2 − 2^-25 = p
// exactly: a float evaluation would accept. The next float up, 1/2, is accepted either way.
TEST(RulesGolden, AcceptTestAtANearTieIsTheDoubleProducts) {
  const double u = uniform_of(1u << 31);
  ASSERT_EQ(u, 0.5 + 0x1p-33);
  const float q = 1.0f - 0x1p-24f;
  const float p = 0.5f - 0x1p-25f;
  EXPECT_FALSE(token_accepts(u, q, p));
  EXPECT_FALSE(lenient_accepts(u, 1.0f, q, p));
  EXPECT_TRUE(token_accepts(u, q, 0.5f));
  EXPECT_TRUE(static_cast<float>(u) * q <= p) << "the float evaluation this test tells apart";
}

RC_GTEST_PROP(RulesProperty, FixedPointIsTheFloorOfTheScaledWeight, ()) {
  // Any sign, a biased exponent from 0 (subnormals) to 132 (below 64), any significand.
  const uint32_t sign = *rc::gen::element(0u, 0x80000000u, 0u);
  const auto exponent = *rc::gen::inRange<uint32_t>(0, 133);
  const auto significand = *rc::gen::inRange<uint32_t>(0, 1u << 23);
  const float w = std::bit_cast<float>(sign | exponent << 23 | significand);
  RC_ASSERT(to_fixed(w) == expected_fixed(w));
  // fixed_from_bits takes [0, 32] with the sign bit clear (to_fixed maps -0 to +0 first).
  if (!std::signbit(w) && w <= 32.0f) RC_ASSERT(fixed_from_bits(w) == expected_fixed(w));
}

TEST(RulesGolden, FixedPointAtChosenWeights) {
  // 1 is 2^58; the smallest normal float 2^-126 and every weight below 2^-58 give 0; 2^-58 gives
  // 1; 1/3 in float is 11184811·2^-25, so its fixed point is 11184811·2^33.
  EXPECT_EQ(to_fixed(1.0f), uint64_t{1} << 58);
  EXPECT_EQ(to_fixed(0x1p-126f), 0u);
  EXPECT_EQ(to_fixed(0x1p-59f), 0u);
  EXPECT_EQ(to_fixed(0x1p-58f), 1u);
  EXPECT_EQ(to_fixed(1.0f / 3.0f), uint64_t{11184811} << 33);
  EXPECT_EQ(to_fixed(-0.5f), 0u);
  EXPECT_EQ(to_fixed(std::numeric_limits<float>::quiet_NaN()), 0u);
  EXPECT_EQ(to_fixed(100.0f), uint64_t{32} << 58) << "clamped at 32";
}

RC_GTEST_PROP(RulesProperty, ResidualWeightsAreTheFloatDifferences, ()) {
  const float p = gen_probability(), q = gen_probability();
  const float l = *rc::gen::element(1.0f, 0.5f, 0.9f);
  // residual_fixed: l·q rounded to float, p minus it rounded to float, then the fixed point.
  const float lq = nearest<float>(Q(exact_value(l) * exact_value(q)));
  const Q difference = Q(exact_value(p) - exact_value(lq));
  const uint64_t expected =
      difference > 0 ? expected_fixed(nearest<float>(difference)) : uint64_t{0};
  RC_ASSERT(residual_fixed(p, q, l) == expected);
  // block_residual_fixed: w·p rounded to float, minus q rounded to float.
  const float wp = nearest<float>(Q(exact_value(l) * exact_value(p)));
  const Q block_difference = Q(exact_value(wp) - exact_value(q));
  const uint64_t block_expected =
      block_difference > 0 ? expected_fixed(nearest<float>(block_difference)) : uint64_t{0};
  RC_ASSERT(block_residual_fixed(l, p, q) == block_expected);
}

// p = 3/4 and q = 2^-30: p − q is 3/4 − 2^-30 exactly, but floats in [1/2, 1) are 2^-24 apart, so
// the float difference rounds back to 3/4 and the weight is 3·2^56; a double (or exact) difference
// would give floor((3/4 − 2^-30)·2^58) = 3·2^56 − 2^28.
TEST(RulesGolden, ResidualWeightIsRoundedToFloatBeforeTheFixedPoint) {
  EXPECT_EQ(residual_fixed(0.75f, 0x1p-30f, 1.0f), uint64_t{3} << 56);
  EXPECT_EQ(block_residual_fixed(1.0f, 0.75f, 0x1p-30f), uint64_t{3} << 56);
  EXPECT_EQ(residual_fixed(0x1p-30f, 0.75f, 1.0f), 0u) << "a negative difference carries no mass";
}

}  // namespace
}  // namespace speclab
