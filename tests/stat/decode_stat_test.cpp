// The decoding engines' random layer end to end (core/decode, docs/testing.md "Statistical
// checks"): speculative_decode on context-dependent Markov pairs emits length-L sequences whose
// joint law is the target chain's (V1, V5, V6), or the exact lenient stream's law (V3), and
// plain_decode — every experiment's baseline — samples the target chain at its temperature; the
// laws are computed in rationals by core/exact. Each check prints N, bins, p-value and the ε it
// detects.
#include <gtest/gtest.h>

#include <map>

#include "core/decode/decode.hpp"
#include "core/exact/exact.hpp"
#include "core/models/markov.hpp"
#include "core/verify/verify_tree.hpp"
#include "tests/support/markov_stream.hpp"
#include "tests/support/stat_support.hpp"

namespace speclab {
namespace {

using testing::fits;
using testing::report_chi_square;
using testing::stat_seed;

// Fifteen checks in this suite share the 1e-6 budget (Bonferroni):
// TokenLevelStreamIsTheTargetChain 2, TreeStreamsAreTheTargetChain 5 (the lossy control is no
// false-failure risk), LenientStreamIsItsExactLossyLaw 1,
// PlainDecodingIsTheTargetChainAtItsTemperature 2, SpeculativeAtHalfTemperatureIsPlainDecodingsLaw
// 1, SixTokenStreamsAreTheTargetChain 4.
const double kAlpha = bonferroni_level(testing::kStatSuiteFalseFailureRate, 15);

constexpr int kVocab = 3;
constexpr int kLength = 4;
constexpr int64_t kSamples = 120000;

// Integer weights (some zero) so rows are exact rationals and exact doubles up to rounding.
const int kTargetWeights[kVocab][kVocab] = {{1, 2, 3}, {0, 1, 1}, {4, 1, 0}};
const int kDraftWeights[kVocab][kVocab] = {{3, 2, 1}, {1, 1, 2}, {1, 1, 1}};

exact::MarkovChain exact_chain(const int (&w)[kVocab][kVocab]) {
  exact::MarkovChain chain{kVocab, {}};
  for (const auto& row : w) {
    const int total = row[0] + row[1] + row[2];
    chain.transition.push_back(
        {exact::Q(row[0], total), exact::Q(row[1], total), exact::Q(row[2], total)});
  }
  return chain;
}

MarkovModel model(const char* name, const int (&w)[kVocab][kVocab]) {
  std::vector<double> table;
  for (const auto& row : w) {
    const double total = row[0] + row[1] + row[2];
    for (int t = 0; t < kVocab; ++t) table.push_back(row[t] / total);
  }
  return MarkovModel(name, kVocab, 1, table);
}

// Samples kSamples sequences of kLength tokens after token 0 and returns the χ² test of them
// against `expected`.
ChiSquareResult test_stream(const char* label, const exact::Distribution& expected,
                            const DecodeConfig& base, uint64_t& seed) {
  auto target = model("target", kTargetWeights);
  auto draft = model("draft", kDraftWeights);
  DecodeConfig config = base;
  config.max_new_tokens = kLength;
  config.seed = seed = stat_seed(label);
  const std::vector<std::vector<int32_t>> prompts(kSamples, std::vector<int32_t>{0});
  const DecodeResult result = speculative_decode(target, draft, prompts, config);

  // Bins: all V^L sequences in base-V order.
  int64_t bins = 1;
  for (int k = 0; k < kLength; ++k) bins *= kVocab;
  std::vector<double> probs(bins, 0.0);
  for (const auto& [sequence, q] : expected) {
    int64_t index = 0;
    for (int t : sequence) index = index * kVocab + t;
    probs[index] = q.convert_to<double>();
  }
  std::vector<int64_t> observed(bins, 0);
  for (const auto& tokens : result.tokens) {
    EXPECT_EQ(tokens.size(), static_cast<size_t>(kLength));
    int64_t index = 0;
    for (int32_t t : tokens) index = index * kVocab + t;
    ++observed[index];
  }
  return chi_square_test(observed, probs);
}

void check_stream(const char* label, const exact::Distribution& expected,
                  const DecodeConfig& base) {
  uint64_t seed = 0;
  const ChiSquareResult r = test_stream(label, expected, base, seed);
  report_chi_square(label, r, kAlpha, seed);
  EXPECT_TRUE(fits(r, kAlpha, seed));
}

TEST(DecodeStat, TokenLevelStreamIsTheTargetChain) {
  const auto expected = exact::chain_distribution(exact_chain(kTargetWeights), 0, kLength);
  check_stream("v1-gamma2", expected,
               {.gamma = 2, .verifier = ChainVerifier{.method = ChainMethod::kToken}});
  check_stream("v1-gamma3", expected,
               {.gamma = 3, .verifier = ChainVerifier{.method = ChainMethod::kToken}});
}

TEST(DecodeStat, TreeStreamsAreTheTargetChain) {
  // Tree decoding end to end (drafting the tree from the draft chain, one target call over every
  // node, recursive rejection or traversal): each lossless candidate law gives the target chain's
  // stream.
  const auto expected = exact::chain_distribution(exact_chain(kTargetWeights), 0, kLength);
  for (const char* method : {"tree-iid", "tree-swor", "tree-topk", "kseq", "traversal"}) {
    DecodeConfig config{.verifier = make_verifier(method, {2, 2})};
    check_stream(method, expected, config);
  }
  // Positive control: the draft softmax used as q for deterministic top-k picks is lossy
  // (docs/verifiers.md V6), and the same test must see it.
  DecodeConfig lossy{.verifier = make_verifier("tree-topk-softmax-q", {2, 2})};
  uint64_t seed = 0;
  const ChiSquareResult r = test_stream("tree-topk-softmax-q", expected, lossy, seed);
  report_chi_square("tree-topk-softmax-q (must reject)", r, kAlpha, seed);
  EXPECT_FALSE(fits(r, kAlpha, seed)) << "the lossy tree method was not detected";
}

TEST(DecodeStat, LenientStreamIsItsExactLossyLaw) {
  const exact::Method lenient{ChainMethod::kLenient, exact::Q(1, 2)};
  const auto expected = exact::enumerate_stream(exact_chain(kTargetWeights),
                                                exact_chain(kDraftWeights), 0, 2, kLength, lenient,
                                                /*cap_gamma=*/true);
  check_stream(
      "v3-half-gamma2", expected,
      {.gamma = 2, .verifier = ChainVerifier{.method = ChainMethod::kLenient, .leniency = 0.5}});
  // And the same samples are not the target chain: the lossy law is far from it.
  const auto target_law = exact::chain_distribution(exact_chain(kTargetWeights), 0, kLength);
  double tv = 0.0;
  for (const auto& [sequence, q] : target_law) {
    const auto it = expected.find(sequence);
    tv += std::abs(q.convert_to<double>() -
                   (it == expected.end() ? 0.0 : it->second.convert_to<double>()));
  }
  EXPECT_GT(tv / 2, 0.02) << "the lenient law should differ visibly from the target chain";
}

// ---- Six-token streams over the V = 4 pair of tests/support/markov_stream.hpp ----
// Its residuals have support ≥ 2 in every context, so the residual's shape matters; six tokens
// hold up to three steps' bonus tokens (γ = 1, depth-1 trees), so a uniform shared between steps
// or between the tokens of plain decoding changes the joint law. 4096 sequences (1912 possible
// at T = 1); N = 300k puts ≈ 1730 in bins of expected count ≥ 20 and detects ε ≈ 0.020 (printed).
constexpr int kSixLength = 6;
constexpr int64_t kSixSamples = 300'000;

// The pair's target chain at temperature T = 1/2: the pipeline's softmax(log p / T) is p²
// renormalised, a rational row again.
std::vector<std::vector<int>> squared(const std::vector<std::vector<int>>& weights) {
  std::vector<std::vector<int>> out = weights;
  for (auto& row : out) {
    for (int& w : row) w *= w;
  }
  return out;
}

void check_six_token_streams(const char* label, const std::vector<double>& probs,
                             const std::vector<std::vector<int32_t>>& tokens, uint64_t seed) {
  std::vector<int64_t> observed(probs.size(), 0);
  const int64_t malformed = static_cast<int64_t>(probs.size()) - 1;
  for (const auto& t : tokens) {
    ++observed[t.size() == static_cast<size_t>(kSixLength)
                   ? testing::stream_code(t.data(), 4, kSixLength)
                   : malformed];
  }
  const ChiSquareResult r = chi_square_test(observed, probs);
  report_chi_square(label, r, kAlpha, seed);
  EXPECT_TRUE(fits(r, kAlpha, seed))
      << label << " " << testing::impossible_stream(r.impossible_category, 4, kSixLength);
}

// Plain decoding at T = 1 and T = 1/2 against the target chain at that temperature.
TEST(DecodeStat, PlainDecodingIsTheTargetChainAtItsTemperature) {
  const testing::MarkovPair pair = testing::stream_pair_v4();
  auto target = testing::markov_model("target", pair.target);
  const std::vector<std::vector<int32_t>> prompts(kSixSamples, std::vector<int32_t>{0});
  for (const auto& [label, temperature] : {std::pair{"t1", 1.0}, std::pair{"t05", 0.5}}) {
    const auto weights = temperature == 1.0 ? pair.target : squared(pair.target);
    const std::vector<double> probs = testing::stream_probs(
        exact::chain_distribution(testing::exact_chain(weights), 0, kSixLength), 4, kSixLength);
    const uint64_t seed = stat_seed(label);
    const DecodeResult result = plain_decode(
        target, prompts,
        {.max_new_tokens = kSixLength, .sampling = {.temperature = temperature}, .seed = seed});
    check_six_token_streams(label, probs, result.tokens, seed);
  }
}

// Speculative decoding with target and draft both at T = 1/2 (their rows are p², q² renormalised)
// has the law of plain decoding at T = 1/2.
TEST(DecodeStat, SpeculativeAtHalfTemperatureIsPlainDecodingsLaw) {
  const testing::MarkovPair pair = testing::stream_pair_v4();
  auto target = testing::markov_model("target", pair.target);
  auto draft = testing::markov_model("draft", pair.draft);
  const std::vector<double> probs = testing::stream_probs(
      exact::chain_distribution(testing::exact_chain(squared(pair.target)), 0, kSixLength), 4,
      kSixLength);
  const uint64_t seed = stat_seed("t05-gamma2");
  const std::vector<std::vector<int32_t>> prompts(kSixSamples, std::vector<int32_t>{0});
  const DecodeResult result = speculative_decode(target, draft, prompts,
                                                 {.max_new_tokens = kSixLength,
                                                  .sampling = {.temperature = 0.5},
                                                  .draft_sampling = {.temperature = 0.5},
                                                  .seed = seed,
                                                  .gamma = 2});
  check_six_token_streams("t05-gamma2", probs, result.tokens, seed);
}

// The draft's own pipeline differs from the target's (T = 1.5 with top-k 2 against T = 0.5): the
// chain, block and tree engines (every lossless tree method, at depth 3) must verify each draft
// against the q it was drawn from, and the stream is still the target's chain at T = 0.5 (its
// weights squared), whatever the draft.
TEST(DecodeStat, DraftWithItsOwnPipelineLeavesTheTargetsLaw) {
  const testing::MarkovPair pair = testing::stream_pair_v4();
  const std::vector<double> probs = testing::stream_probs(
      exact::chain_distribution(testing::exact_chain(squared(pair.target)), 0, kSixLength), 4,
      kSixLength);
  const std::vector<std::pair<const char*, VerifierSpec>> verifiers{
      {"own-pipeline-token", make_verifier("token")},
      {"own-pipeline-block", make_verifier("block")},
      // Depth-3 trees, one per lossless tree method.
      {"own-pipeline-tree-iid", make_verifier("tree-iid", {2, 1, 2})},
      {"own-pipeline-tree-swor", make_verifier("tree-swor", {2, 1, 2})},
      {"own-pipeline-tree-topk", make_verifier("tree-topk", {2, 1, 2})},
      {"own-pipeline-kseq", make_verifier("kseq", {2, 1, 2})},
      {"own-pipeline-traversal", make_verifier("traversal", {2, 1, 2})}};
  for (const auto& [label, verifier] : verifiers) {
    auto target = testing::markov_model("target", pair.target);
    auto draft = testing::markov_model("draft", pair.draft);
    const uint64_t seed = stat_seed(label);
    // Trees decode ~5× slower per stream: a fifth of the streams (power 0.99 against ε ≈ 0.04
    // instead of 0.018), which still sees a q from the wrong pipeline, an error of order 1.
    const bool tree = family_of(verifier) == VerifierFamily::kTree;
    const std::vector<std::vector<int32_t>> prompts(tree ? kSixSamples / 5 : kSixSamples,
                                                    std::vector<int32_t>{0});
    const DecodeResult result =
        speculative_decode(target, draft, prompts,
                           {.max_new_tokens = kSixLength,
                            .sampling = {.temperature = 0.5},
                            .draft_sampling = {.temperature = 1.5, .top_k = 2},
                            .seed = seed,
                            .gamma = 2,
                            .verifier = verifier});
    check_six_token_streams(label, probs, result.tokens, seed);
  }
}

TEST(DecodeStat, SixTokenStreamsAreTheTargetChain) {
  const testing::MarkovPair pair = testing::stream_pair_v4();
  const std::vector<double> probs = testing::stream_probs(
      exact::chain_distribution(testing::exact_chain(pair.target), 0, kSixLength), 4, kSixLength);
  const std::vector<std::vector<int32_t>> prompts(kSixSamples, std::vector<int32_t>{0});
  const std::vector<std::pair<const char*, DecodeConfig>> configs{
      {"token-gamma1", {.gamma = 1, .verifier = make_verifier("token")}},
      {"block-gamma2", {.gamma = 2, .verifier = make_verifier("block")}},
      {"tree-iid-2", {.verifier = make_verifier("tree-iid", {2})}},
      {"tree-swor-2-2", {.verifier = make_verifier("tree-swor", {2, 2})}},
  };
  for (const auto& [label, base] : configs) {
    auto target = testing::markov_model("target", pair.target);
    auto draft = testing::markov_model("draft", pair.draft);
    DecodeConfig config = base;
    config.max_new_tokens = kSixLength;
    config.seed = stat_seed(label);
    const DecodeResult result = speculative_decode(target, draft, prompts, config);
    check_six_token_streams(label, probs, result.tokens, config.seed);
  }
}

}  // namespace
}  // namespace speclab
