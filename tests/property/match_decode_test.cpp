// The match verifiers' headline property on every drafter that needs no downloaded model
// (tests/support/match_equality.hpp): speculative decoding with `coupled` emits plain Gumbel
// decoding's tokens and `sampled-match` plain decoding's, token for token, for γ = 1..8, batches
// of 1, 5 and 16 requests with ragged last steps, T ∈ {0.5, 1, 1.5} with and without top-k, top-p
// and min-p. The SmolLM2 drafts are in tests/model/match_decode_test.cpp. Also: a draft equal to
// the target is accepted at every position under coupled (the shared noise makes both races
// pick the same token), which a draft drawn with its own noise is not.
#include <gtest/gtest.h>
#include <rapidcheck.h>
#include <rapidcheck/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "core/base/error.hpp"
#include "core/decode/decode.hpp"
#include "core/models/model_registry.hpp"
#include "core/models/synthetic_draft.hpp"
#include "tests/support/markov_engine.hpp"
#include "tests/support/match_equality.hpp"

namespace speclab {
namespace {

using testing::DrafterCase;
using testing::expect_match_equals_plain;

const std::vector<int64_t> kAllGammas = {1, 2, 3, 4, 5, 6, 7, 8};

DrafterCase registry_pair(const std::string& target, const std::string& draft) {
  return {draft + " for " + target, [target] { return make_model(target); },
          [draft](const DecodeConfig&) { return make_model(draft); }};
}

TEST(MatchDecode, LinearSoftmaxDraftsEmitPlainDecodingsTokens) {
  expect_match_equals_plain(registry_pair("lsm-mid-target", "lsm-mid-draft"), kAllGammas);
  expect_match_equals_plain(registry_pair("lsm-tiny-target", "lsm-tiny-draft"), kAllGammas);
  // The quickstart pair (V = 32000) at one draft length, 5 requests.
  expect_match_equals_plain(registry_pair("lsm-target", "lsm-draft"), {4});
}

TEST(MatchDecode, ByteNgramDraftsEmitPlainDecodingsTokens) {
  // The order-5 byte n-gram is the target of the byte-level drafts.
  expect_match_equals_plain(registry_pair("ngram-5", "ngram-2"), kAllGammas);
  DrafterCase unigram = registry_pair("ngram-5", "ngram-1");
  unigram.accepts = false;  // a unigram draft of peaked rows may never be accepted
  expect_match_equals_plain(unigram, {3, 8});
}

TEST(MatchDecode, PromptLookupDraftsEmitPlainDecodingsTokens) {
  DrafterCase lookup = registry_pair("ngram-5", "prompt-lookup");
  lookup.accepts = false;  // short synthetic prompts give few matches to look up
  expect_match_equals_plain(lookup, kAllGammas);
}

TEST(MatchDecode, SyntheticDraftsEmitPlainDecodingsTokens) {
  const DrafterCase synthetic{"synthetic:0.6 for lsm-mid-target",
                              [] { return make_model("lsm-mid-target"); },
                              [](const DecodeConfig& c) -> std::unique_ptr<LanguageModel> {
                                return std::make_unique<SyntheticDraft>(
                                    "synthetic:0.6", make_model("lsm-mid-target"),
                                    std::vector<double>{0.6}, c.sampling, c.draft_sampling);
                              },
                              false};  // the synthetic draft's pipeline is a plain temperature
  expect_match_equals_plain(synthetic, kAllGammas);
}

// The same on generated context-dependent Markov pairs (fast enough for the mutant sweep):
// random seeds, γ, budgets, pipelines, request ids and batches.
RC_GTEST_PROP(MatchDecode, MarkovEnginesEmitPlainDecodingsTokens, ()) {
  const std::string name = *rc::gen::element<std::string>("coupled", "sampled-match");
  testing::MarkovEngine s = testing::gen_markov_engine(name, 6, 5, 12);
  DecodeConfig& c = s.config;
  c.sampling = {.temperature = *rc::gen::element(0.5, 1.0, 1.5),
                .top_k = *rc::gen::element<int64_t>(0, 3),
                .top_p = *rc::gen::element(1.0, 0.9)};
  c.draft_sampling = {.temperature = *rc::gen::element(0.7, 1.0), .min_p = 0.1};
  if (name == "sampled-match") {
    c.sampling_rule = *rc::gen::element(TokenSampling::kInverseCdf, TokenSampling::kGumbel);
  }
  const auto n = *rc::gen::inRange<size_t>(1, 6);
  c.request_ids = *rc::gen::unique<std::vector<uint32_t>>(n, rc::gen::inRange<uint32_t>(0, 500));
  std::vector<std::vector<int32_t>> prompts;
  for (size_t b = 0; b < n; ++b) {
    prompts.push_back(*rc::gen::container<std::vector<int32_t>>(*rc::gen::inRange<size_t>(1, 4),
                                                                rc::gen::inRange<int32_t>(0, 5)));
  }
  const DecodeResult plain = plain_decode(s.target, prompts, c);
  const DecodeResult spec = speculative_decode(s.target, s.draft, prompts, c);
  RC_ASSERT(spec.tokens == plain.tokens);
}

// coupled with the target as its own draft: both races see one row and one noise, so every draft
// is accepted (under the coupled-fresh-draft-noise mutant only Σ p² of them would be).
TEST(MatchDecode, CoupledAcceptsEveryDraftOfTheTargetItself) {
  for (const int64_t gamma : {1, 4, 8}) {
    auto target = make_model("lsm-mid-target");
    auto draft = make_model("lsm-mid-target");
    DecodeConfig c = testing::match_config(gamma, true, target->vocab());
    c.draft_sampling = c.sampling;
    c.verifier = make_verifier("coupled");
    const auto prompts = testing::match_prompts(c, target->vocab());
    const DecodeResult r = speculative_decode(*target, *draft, prompts, c);
    EXPECT_GT(r.metrics.tested_positions, 0);
    EXPECT_EQ(r.metrics.accepted_positions, r.metrics.tested_positions) << "γ = " << gamma;
    // ... and the recorded agreement is 1 at every tested position.
    EXPECT_NEAR(r.metrics.coupled_sum, static_cast<double>(r.metrics.tested_positions), 1e-6);
  }
}

// The rule is checked where a config reaches the engine: coupled needs the Gumbel rule.
TEST(MatchDecode, CoupledRefusesInverseCdfSampling) {
  auto target = make_model("lsm-tiny-target");
  auto draft = make_model("lsm-tiny-draft");
  DecodeConfig c;
  c.verifier = make_verifier("coupled");
  c.sampling_rule = TokenSampling::kInverseCdf;
  const std::vector<std::vector<int32_t>> prompts = {{1, 2}};
  try {
    speculative_decode(*target, *draft, prompts, c);
    ADD_FAILURE() << "coupled ran with inverse-CDF sampling";
  } catch (const InvalidInput& e) {
    EXPECT_NE(std::string(e.what()).find("decode.sampling must be \"gumbel\""), std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace speclab
