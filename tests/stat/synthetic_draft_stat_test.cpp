// The synthetic draft (core/models/synthetic_draft.hpp) in the decoding engine: under V1 every
// tested position is accepted with probability Σ min(p, q) = RATE given everything before it, so
// the accepted count over N tested positions is Binomial(N, RATE) exactly; the measured rate (and
// each position's rate for a list of rates) must lie in its Wilson interval at the suite's level.
// And the draft is lossless: the law of the first two tokens is the target's (χ²).
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <memory>

#include "core/decode/decode.hpp"
#include "core/models/markov.hpp"
#include "core/models/model_registry.hpp"
#include "core/models/synthetic_draft.hpp"
#include "tests/support/stat_support.hpp"

namespace speclab {
namespace {

using testing::fits;
using testing::report_chi_square;
using testing::stat_seed;

// Two rate checks, three per-position checks and one χ² share this suite's 1e-6 budget.
const double kAlpha = bonferroni_level(testing::kStatSuiteFalseFailureRate, 6);

std::unique_ptr<LanguageModel> synthetic(std::string_view rates) {
  return make_draft_model(fmt::format("synthetic:{}", rates), "lsm-tiny-target", {}, {});
}

DecodeResult decode_with(LanguageModel& target, LanguageModel& draft, int64_t gamma,
                         int64_t requests, int64_t tokens, uint64_t seed,
                         std::vector<int32_t> prompt = {3, 7, 1}) {
  const std::vector<std::vector<int32_t>> prompts(requests, prompt);
  return speculative_decode(target, draft, prompts,
                            {.max_new_tokens = tokens, .seed = seed, .gamma = gamma});
}

void expect_rate(const char* label, int64_t accepted, int64_t tested, double rate) {
  const Interval ci = wilson_interval(accepted, tested, 1.0 - kAlpha);
  std::cout << "[stat] " << testing::current_test_name() << " " << label << ": " << accepted
            << " of " << tested << " accepted, interval [" << ci.lower << ", " << ci.upper
            << "] at level " << kAlpha << ", rate " << rate << std::endl;
  EXPECT_LE(ci.lower, rate) << label;
  EXPECT_GE(ci.upper, rate) << label;
}

TEST(SyntheticDraftStat, MeasuredAcceptanceIsTheRate) {
  auto target = make_model("lsm-tiny-target");
  auto draft = synthetic("0.8");
  // ~2000 requests × 64 tokens: N ≈ 110k tested positions, interval half-width ≈ 0.006.
  const DecodeResult r = decode_with(*target, *draft, 4, 2000, 64, stat_seed("rate"));
  expect_rate("rate 0.8", r.metrics.accepted_positions, r.metrics.tested_positions, 0.8);
}

TEST(SyntheticDraftStat, RateHoldsWhereTheLeastTokenIsLikely) {
  // Rows whose least probability is large (0.2, 0.25, 0.25), so that the construction's
  // correction for p_m matters: drafting q = RATE·p + (1 − RATE)·e_m instead would accept with
  // RATE + (1 − RATE)·p_m ≈ 0.68-0.69 here.
  const std::vector<double> table = {0.2, 0.3, 0.5, 0.25, 0.25, 0.5, 0.4, 0.35, 0.25};
  MarkovModel target("markov-3", 3, 1, table);
  SyntheticDraft draft("synthetic:0.6", std::make_unique<MarkovModel>("markov-3", 3, 1, table),
                       {0.6}, {}, {});
  const DecodeResult r = decode_with(target, draft, 3, 4000, 32, stat_seed("least"), {0, 2});
  expect_rate("rate 0.6", r.metrics.accepted_positions, r.metrics.tested_positions, 0.6);
}

TEST(SyntheticDraftStat, EachPositionHasItsRate) {
  auto target = make_model("lsm-tiny-target");
  auto draft = synthetic("0.9,0.6,0.3");
  const DecodeResult r = decode_with(*target, *draft, 3, 4000, 32, stat_seed("positions"));
  const double rates[] = {0.9, 0.6, 0.3};
  for (int i = 0; i < 3; ++i) {
    expect_rate(fmt::format("position {}", i + 1).c_str(), r.metrics.position_accepted[i],
                r.metrics.position_reached[i], rates[i]);
  }
}

TEST(SyntheticDraftStat, PairLawIsTheTargets) {
  auto target = make_model("lsm-tiny-target");
  auto draft = synthetic("0.5");
  const int64_t v = target->vocab();
  const std::vector<int32_t> prompt = {3, 7, 1};
  std::vector<int32_t> context = prompt;
  const ScoreRequest first_request{context, 1, 0};
  const std::vector<float> first = target->score({&first_request, 1}, {});
  std::vector<double> expected(v * v, 0.0);
  for (int32_t a = 0; a < v; ++a) {
    context = prompt;
    context.push_back(a);
    const ScoreRequest request{context, 1, 0};
    const std::vector<float> second = target->score({&request, 1}, {});
    for (int32_t b = 0; b < v; ++b) {
      expected[a * v + b] = static_cast<double>(first[a]) * static_cast<double>(second[b]);
    }
  }
  // γ = 2 and 3 tokens per request: the first step drafts 2, so the second token is an accepted
  // x_2, a residual or the bonus.
  const uint64_t seed = stat_seed("pair");
  const DecodeResult result = decode_with(*target, *draft, 2, 100000, 3, seed);
  std::vector<int64_t> observed(v * v, 0);
  for (const auto& tokens : result.tokens) ++observed[tokens[0] * v + tokens[1]];
  const ChiSquareResult chi = chi_square_test(observed, expected);
  report_chi_square("pair", chi, kAlpha, seed);
  EXPECT_TRUE(fits(chi, kAlpha, seed));
}

}  // namespace
}  // namespace speclab
