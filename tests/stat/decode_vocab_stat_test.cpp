// The law of decoding with a draft of another vocabulary (core/decode/decode_vocab.hpp): the first
// three target tokens of tli, slem and slrs against the target chain's exact joint law
// (proofs/heterogeneous_vocab.md), on the toy pair of tests/support/vocab_pair.hpp, whose draft
// writes bytes the target has no token for and whose target has a prefix ("bb") that is no token.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include "core/decode/decode.hpp"
#include "core/decode/decode_vocab.hpp"
#include "core/stats/stats.hpp"
#include "core/verify/verify_string.hpp"
#include "tests/support/stat_support.hpp"
#include "tests/support/vocab_pair.hpp"

namespace speclab {
namespace {

using testing::fits;
using testing::report_chi_square;
using testing::stat_seed;

// Six checks share the suite's 1e-6 budget.
const double kAlpha = bonferroni_level(testing::kStatSuiteFalseFailureRate, 6);
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

// The residual of slrs and tli is drawn by rejection from p (core/verify/verify_string.hpp): a
// candidate t ~ p kept with probability max(0, 1 − ψ(t)/p(t)). Its law must be
// norm(max(0, p − ψ)), here (p − ψ)⁺ = (0.05, 0, 0.10, 0, 0.15, 0.05, 0, 0.10) / 0.45 for a ψ above
// p on three tokens, equal on one, and 0 where p is largest; and the mean number of candidates is
// 1 / 0.45.
TEST(DecodeVocabStat, ResidualByRejectionIsTheResidualLaw) {
  const std::vector<float> p = {0.10f, 0.05f, 0.20f, 0.10f, 0.25f, 0.05f, 0.15f, 0.10f};
  const std::vector<double> psi = {0.05, 0.20, 0.10, 0.30, 0.10, 0.0, 0.15, 0.0};
  std::vector<double> expected = {0.05, 0.0, 0.10, 0.0, 0.15, 0.05, 0.0, 0.10};
  for (double& x : expected) x /= 0.45;
  constexpr int64_t kDraws = 200000;
  const uint64_t seed = stat_seed("residual");
  std::vector<int64_t> observed(p.size(), 0);
  int64_t candidates = 0;
  for (int64_t n = 0; n < kDraws; ++n) {
    // No proposal, and the failed one at position 1: the token is the residual of ψ_1.
    const StringRejectionStep step{.vocab = 8,
                                   .probs_target = p,
                                   .failed_last = true,
                                   .psi = [&](int64_t, int32_t t) { return psi[t]; },
                                   .seed = seed,
                                   .request = static_cast<uint32_t>(n % 1000),
                                   .step = static_cast<uint32_t>(n / 1000)};
    const StringRejectionResult r = verify_string_rejection(step);
    ASSERT_EQ(r.emitted.size(), 1u);
    ++observed[r.emitted[0]];
    candidates += r.residual_candidates;
  }
  const ChiSquareResult r = chi_square_test(observed, expected);
  report_chi_square("residual", r, kAlpha, seed);
  EXPECT_TRUE(fits(r, kAlpha, seed));
  // Geometric with success 0.45: mean 2.22, standard error of the mean ~0.003.
  EXPECT_NEAR(static_cast<double>(candidates) / kDraws, 1.0 / 0.45, 0.03);
}

}  // namespace
}  // namespace speclab
