// The law of decoding with a draft of another vocabulary (core/decode/decode_vocab.hpp): the first
// three target tokens of tli, slem and slrs against the target chain's exact joint law
// (proofs/heterogeneous_vocab.md), on the toy pair of tests/support/vocab_pair.hpp, whose draft
// writes bytes the target has no token for and whose target has a prefix ("bb") that is no token.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include "core/decode/decode.hpp"
#include "core/decode/decode_vocab.hpp"
#include "core/stats/stats.hpp"
#include "tests/support/stat_support.hpp"
#include "tests/support/vocab_pair.hpp"

namespace speclab {
namespace {

using testing::fits;
using testing::report_chi_square;
using testing::stat_seed;

// Five checks share the suite's 1e-6 budget.
const double kAlpha = bonferroni_level(testing::kStatSuiteFalseFailureRate, 5);
constexpr int kLength = 3;
constexpr int64_t kSamples = 60000;

// Decodes kSamples streams of kLength tokens after token "a" and tests them against the target
// chain at the same temperature (weights squared at T = 1/2).
void check_stream(const char* verifier, int64_t gamma, double temperature) {
  const std::string label = fmt::format("{}-gamma{}-t{}", verifier, gamma, temperature);
  auto target = testing::toy_target_model();
  auto draft = testing::toy_draft_model();
  const auto bridge = testing::toy_bridge();
  const uint64_t seed = stat_seed(label);
  DecodeConfig config{.max_new_tokens = kLength,
                      .sampling = {.temperature = temperature},
                      .draft_sampling = {.temperature = temperature},
                      .seed = seed,
                      .gamma = gamma,
                      .verifier = make_verifier(verifier)};
  const std::vector<std::vector<int32_t>> prompts(kSamples, std::vector<int32_t>{0});
  const DecodeResult result = vocab_speculative_decode(target, draft, *bridge, prompts, config);

  const exact::Distribution law =
      exact::chain_distribution(testing::toy_target_chain(temperature == 1.0 ? 1 : 2), 0, kLength);
  // Bins: the 6^3 sequences in base-6 order, and one for a malformed stream.
  std::vector<double> probs(216 + 1, 0.0);
  for (const auto& [sequence, p] : law) {
    probs[sequence[0] * 36 + sequence[1] * 6 + sequence[2]] = p.convert_to<double>();
  }
  std::vector<int64_t> observed(probs.size(), 0);
  for (const auto& t : result.tokens) {
    ++observed[t.size() == kLength ? t[0] * 36 + t[1] * 6 + t[2] : 216];
  }
  const ChiSquareResult r = chi_square_test(observed, probs);
  report_chi_square(label, r, kAlpha, seed);
  EXPECT_TRUE(fits(r, kAlpha, seed)) << label;
  // The draft was exercised: proposals were made and some accepted.
  EXPECT_GT(result.metrics.accepted_positions, kSamples / 20) << label;
}

TEST(DecodeVocabStat, IntersectionStreamIsTheTargetChain) { check_stream("tli", 2, 1.0); }

TEST(DecodeVocabStat, StringMatchStreamIsTheTargetChain) { check_stream("slem", 2, 1.0); }

TEST(DecodeVocabStat, StringRejectionStreamIsTheTargetChain) {
  check_stream("slrs", 3, 1.0);
  check_stream("slrs", 2, 0.5);
}

TEST(DecodeVocabStat, IntersectionAtHalfTemperatureIsTheTargetChain) {
  check_stream("tli", 3, 0.5);
}

}  // namespace
}  // namespace speclab
