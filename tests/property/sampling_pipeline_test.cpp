// The sampling pipeline (core/sampling/sampling.hpp) against an independent long-double
// implementation written here, at temperatures other than 1: at T = 1 a filter that measures the
// raw logits' softmax instead of the tempered one gives the same kept set, so only T ≠ 1 can show
// it. Rows are drawn from a grid of logits (multiples of 1/4 in [-4, 0], some -inf), so that
// equal logits give exact ties at every cut-off and distinct ones differ by far more than float
// rounding; a case whose cut-off lies within rounding of the boundary is discarded, since there
// the float pipeline may legitimately decide either way. The boundaries themselves (top-p's ≥,
// min-p's ≥ and its maximum) are pinned by hand-made rows whose values are exact in every
// arithmetic.
#include <gtest/gtest.h>
#include <rapidcheck.h>
#include <rapidcheck/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <vector>

#include "core/sampling/sampling.hpp"

namespace speclab {
namespace {

constexpr float kMasked = -std::numeric_limits<float>::infinity();

// What the reference decided, with how close each cut-off came to flipping (relative to the
// quantity compared); a margin below kMargin means float rounding could flip it.
struct Reference {
  std::vector<long double> probs;  // renormalised survivors, 0 elsewhere
  long double margin = 1.0L;
};
constexpr long double kMargin = 1e-4L;

// The rule of sampling.hpp from its text alone: temper, then top-k (the k most probable, lower
// id first among equals), then top-p on top-k's survivors as if renormalised (the shortest
// most-probable prefix whose mass reaches top_p), then min-p against the largest tempered
// probability, then renormalise the survivors.
Reference reference_pipeline(const std::vector<float>& logits, const SamplingParams& params) {
  const size_t v = logits.size();
  long double max_logit = -INFINITY;
  for (float l : logits) max_logit = std::max<long double>(max_logit, l);
  std::vector<long double> tempered(v);
  long double total = 0.0L;
  for (size_t i = 0; i < v; ++i) {
    tempered[i] = logits[i] == kMasked
                      ? 0.0L
                      : std::exp((static_cast<long double>(logits[i]) - max_logit) /
                                 static_cast<long double>(params.temperature));
    total += tempered[i];
  }
  for (long double& t : tempered) t /= total;

  Reference ref;
  std::vector<uint8_t> keep(v);
  for (size_t i = 0; i < v; ++i) keep[i] = tempered[i] > 0.0L;
  std::vector<size_t> order(v);
  std::iota(order.begin(), order.end(), size_t{0});
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return tempered[a] > tempered[b]; });
  const size_t k = params.top_k > 0 ? std::min<size_t>(params.top_k, v) : v;
  for (size_t r = k; r < v; ++r) keep[order[r]] = 0;
  if (params.top_p < 1.0) {
    long double mass = 0.0L;
    for (size_t r = 0; r < k; ++r) mass += tempered[order[r]];
    const long double needed = static_cast<long double>(params.top_p) * mass;
    long double cumulative = 0.0L;
    size_t r = 0;
    for (; r < k; ++r) {
      const long double before = cumulative;
      cumulative += tempered[order[r]];
      if (cumulative >= needed) {
        // Distinct from both neighbours of the boundary: this prefix reaches it, the one
        // before falls short.
        ref.margin = std::min(ref.margin, (cumulative - needed) / needed);
        ref.margin = std::min(ref.margin, (needed - before) / needed);
        break;
      }
    }
    for (size_t s = r + 1; s < k; ++s) keep[order[s]] = 0;
  }
  if (params.min_p > 0.0) {
    const long double threshold = static_cast<long double>(params.min_p) *
                                  *std::max_element(tempered.begin(), tempered.end());
    for (size_t i = 0; i < v; ++i) {
      if (tempered[i] < threshold) keep[i] = 0;
      if (tempered[i] > 0.0L) {
        ref.margin = std::min(ref.margin, std::abs(tempered[i] - threshold) / threshold);
      }
    }
  }
  long double kept = 0.0L;
  for (size_t i = 0; i < v; ++i) kept += keep[i] ? tempered[i] : 0.0L;
  ref.probs.resize(v);
  for (size_t i = 0; i < v; ++i) ref.probs[i] = keep[i] ? tempered[i] / kept : 0.0L;
  return ref;
}

std::vector<float> gen_logits() {
  const int64_t v = *rc::gen::inRange<int64_t>(2, 25);
  std::vector<float> logits(v);
  for (float& l : logits) {
    const int step = *rc::gen::inRange(-1, 17);  // -1: masked
    l = step < 0 ? kMasked : -0.25f * static_cast<float>(step);
  }
  if (std::all_of(logits.begin(), logits.end(), [](float l) { return l == kMasked; })) {
    logits[*rc::gen::inRange<int64_t>(0, v)] = 0.0f;
  }
  // The grid's maximum need not be 0 or at token 0.
  const float shift = *rc::gen::element(0.0f, 1.5f, -3.0f);
  for (float& l : logits) l += shift;
  return logits;
}

// Filters on their own and together, at T = 0.5 or 2 (and 1, the case every other test covers).
SamplingParams gen_params(int64_t vocab) {
  SamplingParams params;
  params.temperature = *rc::gen::element(0.5, 2.0, 0.5, 2.0, 1.0);
  if (*rc::gen::arbitrary<bool>()) params.top_k = *rc::gen::inRange<int64_t>(1, vocab + 1);
  if (*rc::gen::arbitrary<bool>()) params.top_p = *rc::gen::element(0.3, 0.5, 0.75, 0.9, 0.99);
  if (*rc::gen::arbitrary<bool>()) params.min_p = *rc::gen::element(0.05, 0.2, 0.5, 0.8);
  return params;
}

void check_against_reference(const std::vector<float>& logits, const SamplingParams& params) {
  const Reference ref = reference_pipeline(logits, params);
  RC_PRE(ref.margin > kMargin);
  const std::vector<float> probs = probs_from_logits(logits, params);
  for (size_t i = 0; i < logits.size(); ++i) {
    RC_ASSERT((probs[i] > 0.0f) == (ref.probs[i] > 0.0L));
    RC_ASSERT(std::abs(probs[i] - ref.probs[i]) <= 1e-6L + 1e-5L * ref.probs[i]);
  }
}

RC_GTEST_PROP(SamplingPipelineProperty, EveryFilterMatchesTheLongDoubleRule, ()) {
  const auto logits = gen_logits();
  check_against_reference(logits, gen_params(static_cast<int64_t>(logits.size())));
}

// Temperature first, then every filter: filtering the logits at T is filtering the logits / T at
// T = 1. Both sides are the pipeline under test; the reference's margin keeps the comparison off
// the cut-offs, where l/T's rounding could decide.
RC_GTEST_PROP(SamplingPipelineProperty, FiltersActOnTheTemperedDistribution, ()) {
  const auto logits = gen_logits();
  SamplingParams params = gen_params(static_cast<int64_t>(logits.size()));
  params.temperature = *rc::gen::element(0.5, 2.0);
  RC_PRE(reference_pipeline(logits, params).margin > kMargin);
  std::vector<float> scaled(logits);
  for (float& l : scaled) l = l == kMasked ? kMasked : static_cast<float>(l / params.temperature);
  SamplingParams at_one = params;
  at_one.temperature = 1.0;
  const auto a = probs_from_logits(logits, params), b = probs_from_logits(scaled, at_one);
  for (size_t i = 0; i < a.size(); ++i) {
    RC_ASSERT((a[i] > 0.0f) == (b[i] > 0.0f));
    RC_ASSERT(std::abs(a[i] - b[i]) <= 1e-6f + 1e-5f * b[i]);
  }
}

std::vector<float> kept_ids(const std::vector<float>& probs) {
  std::vector<float> ids;
  for (size_t i = 0; i < probs.size(); ++i) {
    if (probs[i] > 0.0f) ids.push_back(static_cast<float>(i));
  }
  return ids;
}

// Four equal logits give tempered probabilities of exactly 1/4 at any temperature (the
// exponential of 0 is 1 in every arithmetic), so the cumulative masses 1/4, 1/2, 3/4 are exact and
// top_p = 1/2 lands on the boundary: "mass ≥ top_p" keeps two tokens, a strict ">" three.
TEST(SamplingPipelineBoundary, TopPKeepsThePrefixThatReachesItExactly) {
  const std::vector<float> logits{kMasked, 0.0f, 0.0f, 0.0f, 0.0f};
  for (double t : {0.5, 1.0, 2.0}) {
    const auto probs = probs_from_logits(logits, {.temperature = t, .top_p = 0.5});
    EXPECT_EQ(kept_ids(probs), (std::vector<float>{1.0f, 2.0f})) << "T = " << t;
    EXPECT_EQ(probs[1], 0.5f);
    const auto three = probs_from_logits(logits, {.temperature = t, .top_p = 0.75});
    EXPECT_EQ(kept_ids(three), (std::vector<float>{1.0f, 2.0f, 3.0f})) << "T = " << t;
  }
}

// min-p keeps p ≥ min_p · max: with min_p = 1 exactly the tokens tied at the maximum survive, and
// the maximum is token 3, not token 0. At T = 2 the token one logit below the top has tempered
// ratio e^(−1/2) = 0.607 (kept by min_p = 0.5) while its T = 1 ratio e^(−1) = 0.368 is not; at
// T = 0.5 the token 0.25 below has ratio e^(−1/2) = 0.607 and T = 1 ratio e^(−1/4) = 0.779, so
// min_p = 0.7 drops it at T = 0.5 only.
TEST(SamplingPipelineBoundary, MinPComparesWithTheTemperedMaximum) {
  const std::vector<float> tied{-2.0f, -1.0f, -2.0f, 0.0f, 0.0f};
  EXPECT_EQ(kept_ids(probs_from_logits(tied, {.temperature = 2.0, .min_p = 1.0})),
            (std::vector<float>{3.0f, 4.0f}));
  const std::vector<float> logits{-3.0f, -1.0f, -3.0f, 0.0f};
  EXPECT_EQ(kept_ids(probs_from_logits(logits, {.temperature = 2.0, .min_p = 0.5})),
            (std::vector<float>{1.0f, 3.0f}))
      << "e^(-1/2) ≥ 0.5 at T = 2; e^(-3/2) = 0.223 < 0.5";
  EXPECT_EQ(kept_ids(probs_from_logits(logits, {.temperature = 1.0, .min_p = 0.5})),
            (std::vector<float>{3.0f}))
      << "e^(-1) = 0.368 < 0.5 at T = 1";
  const std::vector<float> near{-0.25f, -2.0f, 0.0f};
  EXPECT_EQ(kept_ids(probs_from_logits(near, {.temperature = 0.5, .min_p = 0.7})),
            (std::vector<float>{2.0f}))
      << "e^(-1/2) = 0.607 < 0.7 at T = 0.5";
  EXPECT_EQ(kept_ids(probs_from_logits(near, {.temperature = 1.0, .min_p = 0.7})),
            (std::vector<float>{0.0f, 2.0f}))
      << "e^(-1/4) = 0.779 ≥ 0.7 at T = 1";
}

// top-p at T = 2 on tempered (0.5, 0.3, 0.2)-like masses: logits ln 4, ln 1, ln 1 + masked give
// T = 1 probabilities (2/3, 1/6, 1/6) and T = 2 ones ∝ (2, 1, 1) = (1/2, 1/4, 1/4). top_p = 0.6
// keeps one token at T = 1 (2/3 ≥ 0.6) and two at T = 2 (1/2 < 0.6 ≤ 3/4).
TEST(SamplingPipelineBoundary, TopPMeasuresTheTemperedMass) {
  const std::vector<float> logits{std::log(4.0f), 0.0f, 0.0f, kMasked};
  EXPECT_EQ(kept_ids(probs_from_logits(logits, {.temperature = 1.0, .top_p = 0.6})),
            (std::vector<float>{0.0f}));
  EXPECT_EQ(kept_ids(probs_from_logits(logits, {.temperature = 2.0, .top_p = 0.6})),
            (std::vector<float>{0.0f, 1.0f}));
}

// min-p at T = 0.5 with ties. The tempered exponential is exact only at 0 (e^0 = 1), so a token
// sits exactly at min_p·max only as a tie with the maximum: with min_p = 1 the maxima at ids 1 and
// 3 (not 0) both stay, each exactly 1/2 of the kept mass. Below the maximum, ids 2 and 4 tie at
// ratio e^(−0.25/0.5) = e^(−1/2) = 0.607 to it, and min-p has no id rule: min_p = 0.6 keeps both,
// 0.65 drops both; at T = 1 their ratio e^(−1/4) = 0.779 survives 0.65. Id 0 (ratio e^(−2) = 0.135
// at T = 0.5) goes whenever min_p > 0.14, so a threshold taken from token 0 would keep everything.
TEST(SamplingPipelineBoundary, MinPTiesAtHalfTemperature) {
  const std::vector<float> logits{-1.0f, 0.0f, -0.25f, 0.0f, -0.25f, kMasked};
  const auto at_max = probs_from_logits(logits, {.temperature = 0.5, .min_p = 1.0});
  EXPECT_EQ(kept_ids(at_max), (std::vector<float>{1.0f, 3.0f}));
  EXPECT_EQ(at_max[1], 0.5f);
  EXPECT_EQ(at_max[3], 0.5f);
  const auto kept = probs_from_logits(logits, {.temperature = 0.5, .min_p = 0.6});
  EXPECT_EQ(kept_ids(kept), (std::vector<float>{1.0f, 2.0f, 3.0f, 4.0f}))
      << "e^(-1/2) = 0.607 ≥ 0.6 for both tied tokens";
  EXPECT_EQ(kept[2], kept[4]);
  EXPECT_EQ(kept_ids(probs_from_logits(logits, {.temperature = 0.5, .min_p = 0.65})),
            (std::vector<float>{1.0f, 3.0f}))
      << "e^(-1/2) = 0.607 < 0.65 for both tied tokens";
  EXPECT_EQ(kept_ids(probs_from_logits(logits, {.temperature = 1.0, .min_p = 0.65})),
            (std::vector<float>{1.0f, 2.0f, 3.0f, 4.0f}))
      << "e^(-1/4) = 0.779 ≥ 0.65 at T = 1";
}

// Every filter at once at T = 2 on a row with a tie at each cut-off. Tempered ratios to the
// maximum e^(l/2): ids 1, 3 at 1; ids 2, 4, 5 at e^(−1/2) = 0.60653; ids 0, 6 at e^(−1) = 0.36788;
// id 7 masked. top_k = 6 cuts the last tie: id 0 stays, id 6 goes. top_p = 0.74 then measures
// top-k's survivors, mass 2 + 3·0.60653 + 0.36788 = 4.18747 (needed 3.09873): the prefix 1, 3, 2
// reaches 2.60653 and 1, 3, 2, 4 reaches 3.21306, so the cut falls inside the middle tie and id 5
// goes. Without top-k the mass is 4.55535, needed 3.37096, and id 5 stays (3.81959). min_p = 0.5
// keeps the middle tie whole and drops the last one (0.368 < 0.5), which top-k and top-p had cut
// already, so all three keep top-p's four; min_p = 0.7 drops the tie 2, 4 together. At T = 1
// (ratios e^(−1) = 0.368 and e^(−2) = 0.135; top-p's prefix 1, 3, 2, 4 again) min_p = 0.5 leaves
// the maxima alone.
TEST(SamplingPipelineBoundary, CombinedFiltersWithATieAtEachCut) {
  const std::vector<float> logits{-2.0f, 0.0f, -1.0f, 0.0f, -1.0f, -1.0f, -2.0f, kMasked};
  const auto kept_at = [&](double t, int64_t top_k, double top_p, double min_p) {
    return kept_ids(probs_from_logits(
        logits, {.temperature = t, .top_k = top_k, .top_p = top_p, .min_p = min_p}));
  };
  EXPECT_EQ(kept_at(2.0, 6, 1.0, 0.0), (std::vector<float>{0, 1, 2, 3, 4, 5}));
  EXPECT_EQ(kept_at(2.0, 6, 0.74, 0.0), (std::vector<float>{1, 2, 3, 4}));
  EXPECT_EQ(kept_at(2.0, 0, 0.74, 0.0), (std::vector<float>{1, 2, 3, 4, 5}));
  EXPECT_EQ(kept_at(2.0, 0, 1.0, 0.5), (std::vector<float>{1, 2, 3, 4, 5}));
  EXPECT_EQ(kept_at(2.0, 6, 0.74, 0.7), (std::vector<float>{1, 3}));
  EXPECT_EQ(kept_at(1.0, 6, 0.74, 0.5), (std::vector<float>{1, 3}));
  const auto probs =
      probs_from_logits(logits, {.temperature = 2.0, .top_k = 6, .top_p = 0.74, .min_p = 0.5});
  EXPECT_EQ(kept_ids(probs), (std::vector<float>{1, 2, 3, 4}));
  const long double low = std::exp(-0.5L), mass = 2.0L + 2.0L * low;
  for (int id : {1, 3}) EXPECT_NEAR(probs[id], 1.0L / mass, 1e-6) << id;
  for (int id : {2, 4}) EXPECT_NEAR(probs[id], low / mass, 1e-6) << id;
}

}  // namespace
}  // namespace speclab
