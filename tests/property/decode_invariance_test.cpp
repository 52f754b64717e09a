// Properties every decoding engine (plain, and speculative with every verifier of the registry:
// the chain, block and tree engines) must have whatever its law:
// - a request's tokens depend on its id, prompt, seed and settings only: not on the other
//   requests, their number or the order of the batch (docs/randomness.md: noise is addressed by
//   request id, never by a slot in the batch);
// - a run stopped after any number of steps and resumed from its committed prefix
//   (DecodeConfig::first_step, generated) emits the rest of the uninterrupted run's tokens;
// - the draft tokens a step accepts were drawn from the draft's own sampling pipeline (its
//   temperature and filters), which differ from the target's here: each lies in the support of
//   the draft's row at its context (for top-k trees, among that row's k most probable tokens).
// The models are Markov tables with an end-of-sequence token, so requests finish at different
// steps and the active batch shrinks and reorders as a run goes.
#include <gtest/gtest.h>
#include <rapidcheck.h>
#include <rapidcheck/gtest.h>

#include <algorithm>
#include <random>
#include <string>
#include <vector>

#include "core/base/error.hpp"
#include "core/decode/decode.hpp"
#include "core/verify/verifier.hpp"
#include "tests/support/markov_engine.hpp"

namespace speclab {
namespace {

constexpr int64_t kVocab = 6;
constexpr int32_t kEos = 5;

using Setup = testing::MarkovEngine;

// `name` is a registry verifier, or "plain".
Setup gen_setup(const std::string& name) {
  Setup s = testing::gen_markov_engine(name, kVocab, kEos, 11);
  s.config.sampling = {.temperature = *rc::gen::element(1.0, 0.7)};
  s.config.draft_sampling = {.temperature = *rc::gen::element(1.0, 1.5), .top_k = 3};
  return s;
}

std::vector<int32_t> gen_prompt() {
  return *rc::gen::container<std::vector<int32_t>>(*rc::gen::inRange<size_t>(1, 4),
                                                   rc::gen::inRange<int32_t>(0, kVocab - 1));
}

DecodeResult run(Setup& s, const std::string& name,
                 const std::vector<std::vector<int32_t>>& prompts, std::vector<uint32_t> ids) {
  DecodeConfig config = s.config;
  config.request_ids = std::move(ids);
  return name == "plain" ? plain_decode(s.target, prompts, config)
                         : speculative_decode(s.target, s.draft, prompts, config);
}

void check_batch_invariance(const std::string& name) {
  Setup s = gen_setup(name);
  const auto n = *rc::gen::inRange<size_t>(2, 6);
  std::vector<std::vector<int32_t>> prompts(n);
  for (auto& p : prompts) p = gen_prompt();
  const auto id_set =
      *rc::gen::unique<std::vector<uint32_t>>(n, rc::gen::inRange<uint32_t>(0, 1000));
  const DecodeResult whole = run(s, name, prompts, id_set);

  // A sub-batch in another order, among requests that were not there before (ids ≥ 1000).
  std::vector<size_t> kept =
      *rc::gen::suchThat(rc::gen::container<std::vector<size_t>>(rc::gen::inRange<size_t>(0, n)),
                         [](const std::vector<size_t>& k) { return !k.empty(); });
  std::sort(kept.begin(), kept.end());
  kept.erase(std::unique(kept.begin(), kept.end()), kept.end());
  std::vector<std::pair<int64_t, std::vector<int32_t>>> batch;  // (index in whole or -1, prompt)
  for (size_t k : kept) batch.emplace_back(static_cast<int64_t>(k), prompts[k]);
  const auto others = *rc::gen::inRange<size_t>(0, 4);
  for (size_t o = 0; o < others; ++o) batch.emplace_back(-1, gen_prompt());
  const auto order = *rc::gen::inRange<uint64_t>(0, 1u << 30);
  std::shuffle(batch.begin(), batch.end(), std::mt19937_64(order));

  std::vector<std::vector<int32_t>> sub_prompts;
  std::vector<uint32_t> sub_ids;
  uint32_t fresh = 1000;
  for (const auto& [index, prompt] : batch) {
    sub_prompts.push_back(prompt);
    sub_ids.push_back(index >= 0 ? id_set[index] : fresh++);
  }
  const DecodeResult part = run(s, name, sub_prompts, sub_ids);
  for (size_t j = 0; j < batch.size(); ++j) {
    if (batch[j].first < 0) continue;
    RC_ASSERT(part.tokens[j] == whole.tokens[batch[j].first]);
  }
}

// Stops a run after k of its steps and resumes it from what each request had committed.
void check_restart(const std::string& name) {
  Setup s = gen_setup(name);
  const auto n = *rc::gen::inRange<size_t>(1, 5);
  std::vector<std::vector<int32_t>> prompts(n);
  for (auto& p : prompts) p = gen_prompt();
  const auto ids = *rc::gen::unique<std::vector<uint32_t>>(n, rc::gen::inRange<uint32_t>(0, 1000));
  const DecodeResult whole = run(s, name, prompts, ids);

  // The committed prefix after k steps, from the per-step records, which come in the order
  // (step, active request); a request is finished once it holds all its tokens.
  const auto& emitted = whole.metrics.step_emitted;
  std::vector<size_t> committed(n, 0);
  size_t record = 0, steps = 0;
  const auto k = *rc::gen::inRange<size_t>(0, emitted.size() + 1);
  while (steps < k && record < emitted.size()) {
    for (size_t b = 0; b < n && record < emitted.size(); ++b) {
      if (committed[b] == whole.tokens[b].size()) continue;
      committed[b] += static_cast<size_t>(emitted[record++]);
    }
    ++steps;
  }
  std::vector<std::vector<int32_t>> rest_prompts;
  std::vector<uint32_t> rest_ids;
  std::vector<size_t> rest_of;
  for (size_t b = 0; b < n; ++b) {
    if (committed[b] == whole.tokens[b].size()) continue;
    std::vector<int32_t> prompt = prompts[b];
    prompt.insert(prompt.end(), whole.tokens[b].begin(), whole.tokens[b].begin() + committed[b]);
    rest_prompts.push_back(std::move(prompt));
    rest_ids.push_back(ids[b]);
    rest_of.push_back(b);
  }
  RC_PRE(!rest_of.empty());
  s.config.first_step = static_cast<uint32_t>(steps);
  for (const size_t b : rest_of) s.config.generated.push_back(static_cast<int64_t>(committed[b]));
  const DecodeResult rest = run(s, name, rest_prompts, rest_ids);
  for (size_t j = 0; j < rest_of.size(); ++j) {
    const auto& all = whole.tokens[rest_of[j]];
    RC_ASSERT(rest.tokens[j] ==
              std::vector<int32_t>(all.begin() + committed[rest_of[j]], all.end()));
  }
}

void check_drafts_from_draft_pipeline(const std::string& name) {
  Setup s = gen_setup(name);
  const std::vector<int32_t> prompt = gen_prompt();
  const std::vector<std::vector<int32_t>> prompts{prompt};
  const DecodeResult result = speculative_decode(s.target, s.draft, prompts, s.config);
  // One request: steps are recorded in order, and a step's first `accepted` tokens are drafts.
  const auto* tree = std::get_if<TreeVerifier>(&s.config.verifier);
  const bool deterministic = tree != nullptr && (tree->method == TreeMethod::kTopk ||
                                                 tree->method == TreeMethod::kTopkSoftmaxQ);
  const auto& tokens = result.tokens[0];
  std::vector<int32_t> context = prompt;
  size_t at = 0;
  for (size_t step = 0; step < result.metrics.step_emitted.size(); ++step) {
    for (int32_t j = 0; j < result.metrics.step_accepted[step]; ++j) {
      const ScoreRequest request{context, 1, 0};
      const std::vector<float> q = s.draft.score(std::span(&request, 1), s.config.draft_sampling);
      const int32_t x = tokens[at];
      if (deterministic) {
        // Top-k children: among the k most probable under q, the lower id first among equals.
        int64_t rank = 0;
        for (int32_t t = 0; t < kVocab; ++t) rank += q[t] > q[x] || (q[t] == q[x] && t < x);
        RC_ASSERT(rank < tree->branches[j]);
      } else {
        RC_ASSERT(q[x] > 0.0f);  // in the support of the draft's own pipeline
      }
      context.push_back(tokens[at++]);
    }
    for (int32_t j = result.metrics.step_accepted[step]; j < result.metrics.step_emitted[step];
         ++j) {
      context.push_back(tokens[at++]);
    }
  }
  RC_ASSERT(at == tokens.size());
}

class DecodeInvariance : public ::testing::TestWithParam<std::string> {};

TEST_P(DecodeInvariance, RequestTokensDoNotDependOnTheBatch) {
  const std::string name = GetParam();
  EXPECT_TRUE(rc::check("a request's tokens are its own whatever the batch",
                        [&] { check_batch_invariance(name); }));
}

TEST_P(DecodeInvariance, ARestartFromTheCommittedPrefixContinuesTheRun) {
  const std::string name = GetParam();
  EXPECT_TRUE(rc::check("a run resumed after k steps emits the rest of the uninterrupted run",
                        [&] { check_restart(name); }));
}

std::vector<std::string> engines() {
  std::vector<std::string> names = verifier_names();
  names.insert(names.begin(), "plain");
  return names;
}
INSTANTIATE_TEST_SUITE_P(Engines, DecodeInvariance, ::testing::ValuesIn(engines()),
                         testing::verifier_param_name);

class DraftPipeline : public ::testing::TestWithParam<std::string> {};

TEST_P(DraftPipeline, AcceptedDraftsComeFromTheDraftsOwnPipeline) {
  const std::string name = GetParam();
  EXPECT_TRUE(rc::check("accepted drafts lie in the support of the draft's pipeline",
                        [&] { check_drafts_from_draft_pipeline(name); }));
}

INSTANTIATE_TEST_SUITE_P(Engines, DraftPipeline, ::testing::ValuesIn(verifier_names()),
                         testing::verifier_param_name);

TEST(DecodeRequestIds, AreCheckedAgainstThePrompts) {
  MarkovModel m = testing::random_markov("m", kVocab, 1, 7, kEos);
  const std::vector<std::vector<int32_t>> prompts{{0}, {1}};
  DecodeConfig config{.request_ids = {4}};
  EXPECT_THROW(plain_decode(m, prompts, config), InvalidInput);
  config.request_ids = {3, 3};
  try {
    plain_decode(m, prompts, config);
    ADD_FAILURE() << "duplicate ids accepted";
  } catch (const InvalidInput& e) {
    EXPECT_NE(std::string(e.what()).find("gives id 3 to two prompts"), std::string::npos)
        << e.what();
  }
  // The default is the prompt's index: ids 0, 1 are the same run as none.
  config.request_ids = {0, 1};
  const auto with = plain_decode(m, prompts, config);
  const auto without = plain_decode(m, prompts, DecodeConfig{});
  EXPECT_EQ(with.tokens, without.tokens);
}

}  // namespace
}  // namespace speclab
