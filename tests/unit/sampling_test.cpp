// core/sampling: the pipeline of docs/verifiers.md, row validation and categorical sampling.
#include "core/sampling/sampling.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <vector>

#include "core/base/error.hpp"
#include "core/base/rules.hpp"
#include "tests/support/error_of.hpp"

namespace speclab {
namespace {

using ::testing::HasSubstr;

std::vector<float> probs(std::vector<float> logits, SamplingParams params) {
  return probs_from_logits(logits, params);
}

using testing::error_of;

// The normaliser's order, written out from its definition (core/base/rules.hpp): per block of
// 2048 tokens, 16 float lane sums (lane k takes t ≡ k mod 16), added in double in lane order; the
// block totals added in double in block order.
double blocked_normaliser(const std::vector<float>& e) {
  double total = 0.0;
  for (size_t base = 0; base < e.size(); base += kNormaliserBlockTokens) {
    const size_t end = std::min(e.size(), base + static_cast<size_t>(kNormaliserBlockTokens));
    float lanes[kNormaliserLanes] = {};
    for (size_t t = base; t < end; ++t) lanes[(t - base) % kNormaliserLanes] += e[t];
    double block = 0.0;
    for (const float lane : lanes) block += lane;
    total += block;
  }
  return total;
}

// The order the normaliser had before blocks: 16 lanes over the whole row, then double.
double whole_row_lanes(const std::vector<float>& e) {
  float lanes[kNormaliserLanes] = {};
  const size_t full = e.size() / kNormaliserLanes * kNormaliserLanes;
  for (size_t t = 0; t < full; ++t) lanes[t % kNormaliserLanes] += e[t];
  double total = 0.0;
  for (const float lane : lanes) total += lane;
  for (size_t t = full; t < e.size(); ++t) total += e[t];
  return total;
}

TEST(Sampling, NormaliserSumsInTheFixedBlockOrder) {
  std::mt19937_64 rng(20261201);
  std::uniform_real_distribution<float> spread(-30.0f, 0.0f);
  int order_visible = 0;  // rows where another order would give another double
  for (const size_t v : {1, 15, 16, 17, 2047, 2048, 2049, 4129, 10000, 49152}) {
    std::vector<float> logits(v);
    for (auto& l : logits) l = spread(rng);
    logits[v / 2] = 0.0f;  // the max, so e ≤ 1 and the row is a softmax
    if (v > 3) logits[1] = -std::numeric_limits<float>::infinity();  // masked: e = 0
    std::vector<float> e(v);
    const double total = tempered_exponentials(logits, 0.0f, 1.0f, e);
    EXPECT_EQ(std::bit_cast<uint64_t>(total), std::bit_cast<uint64_t>(blocked_normaliser(e)))
        << "V = " << v;
    order_visible += whole_row_lanes(e) != total;
    // probs_from_logits is the same exponentials times float(1/total).
    const std::vector<float> probs = probs_from_logits(logits, SamplingParams{});
    const float scale = static_cast<float>(1.0 / total);
    for (size_t t = 0; t < v; ++t) {
      ASSERT_EQ(std::bit_cast<uint32_t>(probs[t]), std::bit_cast<uint32_t>(e[t] * scale))
          << "V = " << v << ", token " << t;
    }
  }
  EXPECT_GT(order_visible, 0) << "no row tells the block order from the whole-row lane order";
}

// The vectorised exponentials (16 / W native vectors of W lanes, W = the build's vector width)
// are the scalar rule applied to each token: every lane of every build computes the same float.
TEST(Sampling, ExponentialsAreTheScalarRuleInEveryLane) {
  std::mt19937_64 rng(20261202);
  std::uniform_real_distribution<float> spread(-90.0f, 0.0f);
  for (const size_t v : {15, 16, 17, 31, 2049, 5003}) {
    std::vector<float> logits(v);
    for (auto& l : logits) l = spread(rng);
    logits[0] = 0.0f;
    if (v > 3) logits[2] = -std::numeric_limits<float>::infinity();
    const float shift = 0.25f, scale = 1.0f / 0.7f;  // the tempered arguments (x − shift)·scale
    std::vector<float> e(v);
    tempered_exponentials(logits, shift, scale, e);
    for (size_t t = 0; t < v; ++t) {
      const float x = (logits[t] - shift) * scale;
      float one = 0.0f;
      exp_nonpositive_row(std::span(&x, 1), std::span(&one, 1));  // the scalar instance
      ASSERT_EQ(std::bit_cast<uint32_t>(e[t]), std::bit_cast<uint32_t>(one))
          << "V = " << v << ", token " << t << ", x = " << x;
    }
  }
}

TEST(Sampling, TemperedExponentialsRejectAWrongOutputSize) {
  std::vector<float> logits(4, 0.0f), exps(3);
  EXPECT_THAT(error_of([&] { tempered_exponentials(logits, 0.0f, 1.0f, exps); }),
              ::testing::HasSubstr("exps has 3 entries; expected 4"));
}

TEST(Sampling, SoftmaxMatchesClosedForm) {
  // logits ln1, ln2, ln4 at T = 1 give weights 1:2:4.
  const auto out = probs({0.0f, std::log(2.0f), std::log(4.0f)}, {});
  EXPECT_NEAR(out[0], 1.0 / 7, 1e-7);
  EXPECT_NEAR(out[1], 2.0 / 7, 1e-7);
  EXPECT_NEAR(out[2], 4.0 / 7, 1e-7);
}

TEST(Sampling, TemperatureDividesLogits) {
  // logits 0, ln4 at T = 2 act as 0, ln2: weights 1:2.
  const auto out = probs({0.0f, std::log(4.0f)}, {.temperature = 2.0});
  EXPECT_NEAR(out[0], 1.0 / 3, 1e-7);
  EXPECT_NEAR(out[1], 2.0 / 3, 1e-7);
}

TEST(Sampling, TemperatureZeroIsGreedyWithLowestIdOnTies) {
  EXPECT_THAT(probs({1.0f, 3.0f, 3.0f, 2.0f}, {.temperature = 0.0}),
              ::testing::ElementsAre(0.0f, 1.0f, 0.0f, 0.0f));
}

TEST(Sampling, TopKKeepsMostProbableAndLowerIdOnTies) {
  // weights 1:2:2:4 (logits ln), top-2 keeps token 3 and, of the tied 1 and 2, token 1.
  const float l2 = std::log(2.0f), l4 = std::log(4.0f);
  const auto out = probs({0.0f, l2, l2, l4}, {.top_k = 2});
  EXPECT_NEAR(out[1], 2.0 / 6, 1e-7);
  EXPECT_NEAR(out[3], 4.0 / 6, 1e-7);
  EXPECT_EQ(out[0], 0.0f);
  EXPECT_EQ(out[2], 0.0f);
}

TEST(Sampling, TopPKeepsSmallestSetReachingMass) {
  // tempered (0.5, 0.3, 0.2): top_p 0.7 keeps {0, 1} (0.5 < 0.7 ≤ 0.8) renormalised to 5/8, 3/8;
  // top_p 0.5 keeps {0} (0.5 ≥ 0.5).
  const std::vector<float> logits = {std::log(0.5f), std::log(0.3f), std::log(0.2f)};
  const auto a = probs(logits, {.top_p = 0.7});
  EXPECT_NEAR(a[0], 0.625, 1e-6);
  EXPECT_NEAR(a[1], 0.375, 1e-6);
  EXPECT_EQ(a[2], 0.0f);
  EXPECT_THAT(probs(logits, {.top_p = 0.5}), ::testing::ElementsAre(1.0f, 0.0f, 0.0f));
}

TEST(Sampling, TopPMeasuresMassAmongTopKSurvivors) {
  // (0.4, 0.3, 0.2, 0.1), top-k 2 leaves (0.4, 0.3) i.e. (4/7, 3/7); top_p 0.5 of that keeps {0}.
  const std::vector<float> logits = {std::log(0.4f), std::log(0.3f), std::log(0.2f),
                                     std::log(0.1f)};
  EXPECT_THAT(probs(logits, {.top_k = 2, .top_p = 0.5}),
              ::testing::ElementsAre(1.0f, 0.0f, 0.0f, 0.0f));
}

TEST(Sampling, MinPComparesWithMaximum) {
  // (0.5, 0.3, 0.2) with min_p 0.5 keeps probs ≥ 0.25: tokens 0 and 1.
  const auto out = probs({std::log(0.5f), std::log(0.3f), std::log(0.2f)}, {.min_p = 0.5});
  EXPECT_NEAR(out[0], 0.625, 1e-6);
  EXPECT_NEAR(out[1], 0.375, 1e-6);
  EXPECT_EQ(out[2], 0.0f);
}

TEST(Sampling, MaskedLogitsGetZeroProbability) {
  const float ninf = -std::numeric_limits<float>::infinity();
  EXPECT_THAT(probs({ninf, 0.0f, ninf}, {}), ::testing::ElementsAre(0.0f, 1.0f, 0.0f));
}

TEST(Sampling, BadParametersNameTheField) {
  const std::vector<float> logits = {0.0f, 1.0f};
  EXPECT_THAT(error_of([&] { probs(logits, {.temperature = -1.0}); }),
              HasSubstr("sampling.temperature is -1"));
  EXPECT_THAT(error_of([&] { probs(logits, {.temperature = std::nan("")}); }),
              HasSubstr("sampling.temperature is nan"));
  EXPECT_THAT(error_of([&] { probs(logits, {.top_k = -3}); }), HasSubstr("sampling.top_k is -3"));
  EXPECT_THAT(error_of([&] { probs(logits, {.top_p = 0.0}); }), HasSubstr("sampling.top_p is 0"));
  EXPECT_THAT(error_of([&] { probs(logits, {.top_p = 1.5}); }), HasSubstr("sampling.top_p is 1.5"));
  EXPECT_THAT(error_of([&] { probs(logits, {.min_p = 2.0}); }), HasSubstr("sampling.min_p is 2"));
}

TEST(Sampling, BadLogitsNameTheToken) {
  EXPECT_THAT(error_of([] {
                probs({0.0f, std::nanf(""), 1.0f}, {});
              }),
              HasSubstr("logits token 1 is nan"));
  EXPECT_THAT(error_of([] {
                probs({0.0f, std::numeric_limits<float>::infinity()}, {});
              }),
              HasSubstr("logits token 1 is inf"));
  const float ninf = -std::numeric_limits<float>::infinity();
  EXPECT_THAT(error_of([&] { probs({ninf, ninf}, {}); }), HasSubstr("all -inf"));
  EXPECT_THAT(error_of([] { probs({}, {}); }), HasSubstr("logits is empty"));
}

TEST(Sampling, ValidateRowNamesArgumentRequestPositionAndValue) {
  const RowLocation where{"probs_draft", 3, 1, 2};
  EXPECT_THAT(
      error_of([&] {
        validate_probability_row(std::vector<float>{0.5f, 0.43f}, where);
      }),
      HasSubstr("probs_draft row 3 (request 1, position 2) sums to 0.93; expected 1 ± 0.0001"));
  EXPECT_THAT(error_of([&] {
                validate_probability_row(std::vector<float>{0.5f, std::nanf("")}, where);
              }),
              HasSubstr("probs_draft row 3 (request 1, position 2): token 1 has probability nan"));
  EXPECT_THAT(error_of([&] {
                validate_probability_row(std::vector<float>{1.5f, -0.5f}, where);
              }),
              HasSubstr("token 1 has probability -0.5"));
  EXPECT_THAT(error_of([&] {
                validate_probability_row(
                    std::vector<float>{std::numeric_limits<float>::infinity(), 0.0f}, where);
              }),
              HasSubstr("token 0 has probability inf"));
  // Within tolerance passes.
  EXPECT_NO_THROW(validate_probability_row(std::vector<float>{0.50004f, 0.5f}, where));
}

TEST(Sampling, CategoricalInvertsTheCdf) {
  // weights (1/4, 3/4): u < 1/4 picks 0. u = (bits + 1/2)/2^32, so bits < 2^30 - 1/2 picks 0.
  const std::vector<float> w = {0.25f, 0.75f};
  EXPECT_EQ(sample_categorical(w, 0), 0);
  EXPECT_EQ(sample_categorical(w, (1u << 30) - 1), 0);
  EXPECT_EQ(sample_categorical(w, 1u << 30), 1);
  EXPECT_EQ(sample_categorical(w, 0xffffffffu), 1);
}

TEST(Sampling, CategoricalNeverPicksZeroWeight) {
  const std::vector<float> w = {0.0f, 0.5f, 0.0f, 0.5f, 0.0f};
  for (uint32_t bits : {0u, 1u, 0x7fffffffu, 0x80000000u, 0xffffffffu}) {
    const int32_t t = sample_categorical(w, bits);
    EXPECT_TRUE(t == 1 || t == 3) << bits;
  }
  EXPECT_THAT(error_of([] {
                sample_categorical(std::vector<float>{0.0f, 0.0f}, 5);
              }),
              HasSubstr("all 2 weights are zero"));
}

TEST(Sampling, FixedPointTotalIsWhatCategoricalDrawsFrom) {
  // Weights below 2^-58 are positive floats but zero in the fixed point: a row of them has
  // nothing to draw, which the tree-swor drafter checks before asking for another sibling.
  const std::vector<float> tiny = {1e-20f, 0.0f, 3e-18f};
  EXPECT_EQ(fixed_point_total(tiny), 0u);
  EXPECT_THAT(error_of([&] { sample_categorical(tiny, 5); }), HasSubstr("all 3 weights are zero"));
  EXPECT_EQ(fixed_point_total(std::vector<float>{0.5f, 0.25f, -1.0f, 1e-20f}), 3ull << 56);
  EXPECT_EQ(fixed_point_total(std::vector<float>{}), 0u);
}

TEST(Sampling, ArgmaxTakesLowestIdOnTies) {
  EXPECT_EQ(argmax_lowest(std::vector<float>{0.2f, 0.4f, 0.4f}), 1);
  EXPECT_EQ(argmax_lowest(std::vector<float>{0.7f}), 0);
}

}  // namespace
}  // namespace speclab
