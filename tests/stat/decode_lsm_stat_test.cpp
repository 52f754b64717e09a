// The decoding engine on a LinearSoftmax pair (core/decode, core/models/linear_softmax): the joint
// law of the first two generated tokens equals the target's p(a | prompt)·p(b | prompt, a), for V1
// at V = 16 (256 joint outcomes), with N, bins, p-value and detectable ε printed. Each request
// generates γ + 1 tokens, so its first step drafts the full γ (the engine drafts
// min(γ, tokens left − 1)): the second token is then an accepted x_2, the residual at position 2
// or the bonus, not only position 1's bonus.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>

#include "core/decode/decode.hpp"
#include "core/models/model_registry.hpp"
#include "tests/support/stat_support.hpp"

namespace speclab {
namespace {

using testing::fits;
using testing::report_chi_square;
using testing::stat_seed;

// Two checks share this suite's 1e-6 budget.
const double kAlpha = bonferroni_level(testing::kStatSuiteFalseFailureRate, 2);

// The target's row after a context at `sampling` (a temperature and top-k), derived here rather
// than by the pipeline under test: the T = 1 softmax (the pipeline's unfiltered path, checked on
// its own in tests/unit and tests/property) raised to 1/T in long double, cut to the k largest
// (the lower id first among equals) and renormalised.
std::vector<double> target_row(LanguageModel& target, const std::vector<int32_t>& context,
                               const SamplingParams& sampling) {
  EXPECT_EQ(sampling.top_p, 1.0);
  EXPECT_EQ(sampling.min_p, 0.0);
  const ScoreRequest request{context, 1, 0};
  const std::vector<float> softmax = target.score({&request, 1}, SamplingParams{});
  const size_t v = softmax.size();
  std::vector<long double> w(v);
  for (size_t t = 0; t < v; ++t) {
    w[t] = std::pow(static_cast<long double>(softmax[t]), 1.0L / sampling.temperature);
  }
  std::vector<size_t> order(v);
  std::iota(order.begin(), order.end(), size_t{0});
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return w[a] > w[b]; });
  const size_t k = sampling.top_k > 0 ? static_cast<size_t>(sampling.top_k) : v;
  for (size_t r = k; r < v; ++r) w[order[r]] = 0.0L;
  const long double total = std::accumulate(w.begin(), w.end(), 0.0L);
  std::vector<double> row(v);
  for (size_t t = 0; t < v; ++t) row[t] = static_cast<double>(w[t] / total);
  return row;
}

void check_pair_law(const char* label, const SamplingParams& sampling, int64_t gamma) {
  auto target = make_model("lsm-tiny-target");
  auto draft = make_model("lsm-tiny-draft");
  const int64_t v = target->vocab();
  const std::vector<int32_t> prompt = {3, 7, 1};

  // Exact law of two plain-decoding tokens from the target's rows at `sampling`.
  std::vector<int32_t> context = prompt;
  const std::vector<double> first = target_row(*target, context, sampling);
  std::vector<double> expected(v * v, 0.0);
  for (int32_t a = 0; a < v; ++a) {
    context = prompt;
    context.push_back(a);
    const std::vector<double> second = target_row(*target, context, sampling);
    for (int32_t b = 0; b < v; ++b) {
      expected[a * v + b] = first[a] * second[b];
    }
  }

  // N = 200k over the ≤ 256 outcomes (bins of expected count ≥ 20: ~205 at T = 1, ~63 at T = 0.7
  // with top-k 8) detects ε ≈ 0.015 and 0.012 (printed).
  constexpr int64_t kSamples = 200000;
  const uint64_t seed = stat_seed(label);
  const std::vector<std::vector<int32_t>> prompts(kSamples, prompt);
  const DecodeResult result = speculative_decode(*target, *draft, prompts,
                                                 {.max_new_tokens = gamma + 1,
                                                  .sampling = sampling,
                                                  .draft_sampling = sampling,
                                                  .seed = seed,
                                                  .gamma = gamma});
  // The first step of every request drafted γ tokens: the check exercises positions 2..γ.
  ASSERT_EQ(
      *std::max_element(result.metrics.step_drafted.begin(), result.metrics.step_drafted.end()),
      gamma);
  std::vector<int64_t> observed(v * v, 0);
  for (const auto& tokens : result.tokens) {
    ASSERT_EQ(tokens.size(), static_cast<size_t>(gamma + 1));
    ++observed[tokens[0] * v + tokens[1]];
  }
  const ChiSquareResult r = chi_square_test(observed, expected);
  report_chi_square(label, r, kAlpha, seed);
  EXPECT_TRUE(fits(r, kAlpha, seed));
  // The draft must actually have been used and sometimes rejected, or the test proves little.
  EXPECT_GT(result.metrics.accepted_positions, 0);
  EXPECT_LT(result.metrics.acceptance_rate(), 1.0);
}

TEST(DecodeLsmStat, TokenLevelPairLawIsTheTargets) { check_pair_law("t1", {}, 3); }

TEST(DecodeLsmStat, TokenLevelPairLawAtLowTemperatureWithTopK) {
  check_pair_law("t07-top8", {.temperature = 0.7, .top_k = 8}, 2);
}

}  // namespace
}  // namespace speclab
