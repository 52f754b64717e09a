// Decoding with a draft of another vocabulary (core/decode/decode_vocab.hpp) on the toy pair of
// tests/support/vocab_pair.hpp: slem emits plain decoding's tokens, a deterministic pair's metrics
// are derived by hand, and bad pairings are refused. The laws are
// tests/stat/decode_vocab_stat_test.
#include "core/decode/decode_vocab.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "core/decode/decode.hpp"
#include "core/models/markov.hpp"
#include "tests/support/error_of.hpp"
#include "tests/support/vocab_pair.hpp"

namespace speclab {
namespace {

using ::testing::HasSubstr;

std::vector<std::vector<int32_t>> prompts(int64_t n) {
  std::vector<std::vector<int32_t>> out;
  for (int64_t b = 0; b < n; ++b) out.push_back({static_cast<int32_t>(b % 6)});
  return out;
}

// sampled-match draws the target's token at each output position with plain decoding's noise, so
// slem's output is plain decoding's token for token, whatever the draft wrote, at T = 1 and T = 0.
TEST(DecodeVocab, StringMatchEmitsPlainDecodingsTokens) {
  auto target = testing::toy_target_model();
  auto draft = testing::toy_draft_model();
  const auto bridge = testing::toy_bridge();
  for (const double temperature : {1.0, 0.0}) {
    DecodeConfig config{.max_new_tokens = 12,
                        .sampling = {.temperature = temperature},
                        .seed = 7,
                        .gamma = 3,
                        .verifier = make_verifier("slem")};
    const DecodeResult spec = vocab_speculative_decode(target, draft, *bridge, prompts(64), config);
    const DecodeResult plain = plain_decode(target, prompts(64), config);
    EXPECT_EQ(spec.tokens, plain.tokens) << "T = " << temperature;
    EXPECT_GT(spec.metrics.accepted_positions, 0);
    EXPECT_LT(spec.metrics.steps, plain.metrics.steps);
  }
}

// A deterministic pair: the target always emits "ab" (id 2); the draft writes a, b, a, b, ... So
// slrs munches "ab" (then 'a' leaves the prefixes of "abb"), ψ = 1·1·(1 − q(b | "ab")) = 1, and
// every proposal is accepted: with γ = 3 and 8 tokens, two steps of 3 accepted + 1 bonus, 6
// accepted tokens of 2 bytes. tli can propose only "a" or "b", which the target never emits.
TEST(DecodeVocab, DeterministicPairsMetricsAreDerivedByHand) {
  std::vector<double> target_table(36, 0.0), draft_table(9 * 3, 0.0);
  for (int t = 0; t < 6; ++t) target_table[t * 6 + 2] = 1.0;
  for (int row = 0; row < 9; ++row) draft_table[row * 3 + (row % 3 == 0 ? 1 : 0)] = 1.0;
  MarkovModel target("always-ab", 6, 1, target_table);
  MarkovModel draft("abab", 3, 2, draft_table);
  const auto bridge = testing::toy_bridge();
  DecodeConfig config{.max_new_tokens = 8, .seed = 3, .gamma = 3};
  const std::vector<std::vector<int32_t>> prompt{{2}};  // "ab": the draft continues with 'a'

  config.verifier = make_verifier("slrs");
  DecodeResult r = vocab_speculative_decode(target, draft, *bridge, prompt, config);
  EXPECT_EQ(r.tokens[0], std::vector<int32_t>(8, 2));
  EXPECT_EQ(r.metrics.steps, 2);
  EXPECT_EQ(r.metrics.accepted_positions, 6);
  EXPECT_EQ(r.metrics.accepted_bytes, 12);

  config.verifier = make_verifier("slem");
  r = vocab_speculative_decode(target, draft, *bridge, prompt, config);
  EXPECT_EQ(r.metrics.accepted_positions, 6);
  EXPECT_EQ(r.metrics.accepted_bytes, 12);

  config.verifier = make_verifier("tli");
  r = vocab_speculative_decode(target, draft, *bridge, prompt, config);
  EXPECT_EQ(r.tokens[0], std::vector<int32_t>(8, 2));
  EXPECT_EQ(r.metrics.accepted_positions, 0);
  EXPECT_EQ(r.metrics.accepted_bytes, 0);
  EXPECT_EQ(r.metrics.steps, 8);
}

TEST(DecodeVocab, BadPairingsAreRefused) {
  auto target = testing::toy_target_model();
  auto draft = testing::toy_draft_model();
  const auto bridge = testing::toy_bridge();
  DecodeConfig config{.max_new_tokens = 4, .verifier = make_verifier("token")};
  EXPECT_THAT(testing::error_of(
                  [&] { vocab_speculative_decode(target, draft, *bridge, prompts(1), config); }),
              HasSubstr("verifier \"token\" needs the draft's vocabulary to be the target's"));
  EXPECT_THAT(testing::error_of([&] { speculative_decode(target, draft, prompts(1), config); }),
              HasSubstr("decodes with verifier tli, slem or slrs"));
  // slrs reads a string's probability from one path of single bytes.
  config.verifier = make_verifier("slrs");
  const auto multi = make_vocab_bridge(raw_vocabulary("t", testing::toy_target_strings()),
                                       raw_vocabulary("d", {"a", "b", "ab"}));
  EXPECT_THAT(testing::error_of(
                  [&] { vocab_speculative_decode(target, draft, *multi, prompts(1), config); }),
              HasSubstr("slrs decodes with a draft whose tokens are single bytes"));
  // The bridge's vocabularies must be the models'.
  EXPECT_THAT(testing::error_of(
                  [&] { vocab_speculative_decode(draft, target, *bridge, prompts(1), config); }),
              HasSubstr("but the models have 3 and 6"));
}

}  // namespace
}  // namespace speclab
