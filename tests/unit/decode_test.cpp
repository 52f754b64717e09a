// core/decode: plain and speculative decoding engines on table models.
#include "core/decode/decode.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <chrono>
#include <functional>
#include <map>
#include <numeric>
#include <string>
#include <thread>
#include <tuple>

#include "core/base/error.hpp"
#include "core/base/philox.hpp"
#include "core/verify/verify_block.hpp"
#include "core/verify/verify_typical.hpp"
#include "tests/support/chain_fixture.hpp"
#include "tests/support/error_of.hpp"
#include "tests/support/markov_models.hpp"
#include "tests/support/trusting_model.hpp"

namespace speclab {
namespace {

using ::testing::HasSubstr;
using testing::random_markov;
using testing::TrustingModel;

std::vector<std::vector<int32_t>> prompts(int64_t n, int64_t vocab) {
  std::vector<std::vector<int32_t>> out;
  for (int64_t b = 0; b < n; ++b) {
    std::vector<int32_t> p(1 + b % 3);
    for (size_t i = 0; i < p.size(); ++i) p[i] = static_cast<int32_t>((b + 2 * i) % vocab);
    out.push_back(p);
  }
  return out;
}

double now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// A stateful table model whose every computed position costs kPositionCost of wall time, as a
// transformer's does: it caches the tokens it has computed per sequence (a KV cache), reuses the
// longest matching prefix and "computes" (sleeps for) the rest, in the prompt pass and in score().
class SlowPromptModel : public MarkovModel {
 public:
  static constexpr auto kPositionCost = std::chrono::milliseconds(1);

  explicit SlowPromptModel(MarkovModel table) : MarkovModel(std::move(table)) {}

  void truncate(int64_t sequence_id, int64_t length) override {
    std::vector<int32_t>& cached = cached_[sequence_id];
    if (length < static_cast<int64_t>(cached.size())) cached.resize(length);
  }
  void release(int64_t sequence_id) override { cached_.erase(sequence_id); }
  int64_t prefilled_positions() const { return prefilled_; }
  int64_t scored_positions() const { return scored_; }
  /// When the last prompt pass returned (steady clock seconds).
  double last_prefill_end() const { return last_prefill_end_; }

 protected:
  int64_t prefill_state(std::span<const ScoreRequest> requests) override {
    int64_t computed = 0;
    for (const ScoreRequest& r : requests) {
      if (r.tokens.size() < 2) continue;
      computed += compute(r.sequence_id, r.tokens.first(r.tokens.size() - 1), r.tokens.size());
    }
    prefilled_ += computed;
    last_prefill_end_ = now();
    return computed;
  }
  void score_logits(std::span<const ScoreRequest> requests, std::span<float> logits) override {
    for (const ScoreRequest& r : requests) {
      scored_ += compute(r.sequence_id, r.tokens, r.tokens.size() - r.n_positions);
    }
    MarkovModel::score_logits(requests, logits);
  }

 private:
  int64_t compute(int64_t sequence_id, std::span<const int32_t> tokens, size_t reuse_limit) {
    std::vector<int32_t>& cached = cached_[sequence_id];
    size_t keep = 0;
    while (keep < std::min(cached.size(), reuse_limit) && cached[keep] == tokens[keep]) ++keep;
    const auto n = static_cast<int64_t>(tokens.size() - keep);
    std::this_thread::sleep_for(n * kPositionCost);
    cached.assign(tokens.begin(), tokens.end());
    return n;
  }

  std::map<int64_t, std::vector<int32_t>> cached_;
  int64_t prefilled_ = 0, scored_ = 0;
  double last_prefill_end_ = 0.0;
};

// The prompt pass is not decoding: every engine runs it first, timed per request, and starts the
// decode clock after it, so a long prompt changes neither the positions decoding computes nor the
// time it is charged (speclab run once timed a 206-token prompt as decoding: 1.41× for 3.28×).
TEST(DecodeEngine, PromptPassIsTimedApartFromDecoding) {
  const MarkovModel target_table = random_markov("target", 5, 2, 81);
  const MarkovModel draft_table = random_markov("draft", 5, 2, 82);
  const std::vector<std::vector<int32_t>> short_prompts = {{1, 2}, {3, 4}};
  std::vector<std::vector<int32_t>> long_prompts;
  for (const auto& p : short_prompts) {
    std::vector<int32_t> prompt(38);
    for (size_t i = 0; i < prompt.size(); ++i) prompt[i] = static_cast<int32_t>(i % 5);
    prompt.insert(prompt.end(), p.begin(), p.end());  // the same last two tokens: the same rows
    long_prompts.push_back(prompt);
  }
  using Engine = std::function<DecodeResult(LanguageModel&, LanguageModel&,
                                            std::span<const std::vector<int32_t>>)>;
  const DecodeConfig plain_config{.max_new_tokens = 9, .seed = 4};
  DecodeConfig chain_config{.max_new_tokens = 9, .seed = 4, .gamma = 3};
  DecodeConfig tree_config{
      .max_new_tokens = 9, .seed = 4, .verifier = make_verifier("tree-iid", {2, 2})};
  const std::vector<std::tuple<std::string, int, Engine>> engines = {
      {"plain", 1, [&](auto& t, auto&, auto ps) { return plain_decode(t, ps, plain_config); }},
      {"chain", 2,
       [&](auto& t, auto& d, auto ps) { return speculative_decode(t, d, ps, chain_config); }},
      {"tree", 2,
       [&](auto& t, auto& d, auto ps) { return speculative_decode(t, d, ps, tree_config); }}};
  for (const auto& [name, n_models, engine] : engines) {
    SlowPromptModel short_target(target_table), short_draft(draft_table);
    const DecodeResult short_run = engine(short_target, short_draft, short_prompts);
    SlowPromptModel target(target_table), draft(draft_table);
    const DecodeResult run = engine(target, draft, long_prompts);
    const double end = now();
    const DecodeMetrics& m = run.metrics;

    // The prompt pass: each prompt's first L - 1 = 39 positions, timed per request.
    EXPECT_EQ(target.prefilled_positions(), 2 * 39) << name;
    EXPECT_EQ(m.prompt_tokens, 2 * 40) << name;
    ASSERT_EQ(m.request_prefill_seconds.size(), 2u) << name;
    const double prompt_cost =
        n_models * 39 * std::chrono::duration<double>(SlowPromptModel::kPositionCost).count();
    for (double seconds : m.request_prefill_seconds) EXPECT_GE(seconds, prompt_cost) << name;
    EXPECT_DOUBLE_EQ(m.prefill_seconds(),
                     m.request_prefill_seconds[0] + m.request_prefill_seconds[1])
        << name;
    EXPECT_EQ(m.prefill_positions, n_models * 2 * 39) << name;

    // Decoding computes the same positions, and emits the same tokens, after either prompt.
    EXPECT_EQ(run.tokens, short_run.tokens) << name;
    EXPECT_EQ(target.scored_positions(), short_target.scored_positions()) << name;
    EXPECT_EQ(draft.scored_positions(), short_draft.scored_positions()) << name;

    // The decode clock starts after the last prompt pass and stops before the engine returns.
    const double prefill_end = std::max(target.last_prefill_end(), draft.last_prefill_end());
    EXPECT_LE(m.decode_seconds, end - prefill_end) << name;
    EXPECT_GT(m.decode_seconds, 0.0) << name;
    EXPECT_DOUBLE_EQ(m.seconds(), m.prefill_seconds() + m.decode_seconds) << name;
    ASSERT_EQ(m.request_decode_seconds.size(), 2u) << name;
    for (double seconds : m.request_decode_seconds) {
      EXPECT_GT(seconds, 0.0) << name;
      EXPECT_LE(seconds, m.decode_seconds) << name;
    }
  }
}

TEST(DecodeEngine, GreedySpeculativeEqualsPlainGreedy) {
  auto target = random_markov("target", 5, 2, 1);
  auto draft = random_markov("draft", 5, 1, 2);
  const auto ps = prompts(12, 5);
  DecodeConfig config{.max_new_tokens = 17, .sampling = {.temperature = 0.0}, .seed = 3};
  const auto plain = plain_decode(target, ps, config);
  for (ChainMethod method : {ChainMethod::kGreedy, ChainMethod::kToken}) {
    for (int64_t gamma : {0, 1, 3, 6}) {
      config.gamma = gamma;
      config.verifier = ChainVerifier{.method = method};
      const auto spec = speculative_decode(target, draft, ps, config);
      EXPECT_EQ(spec.tokens, plain.tokens) << "method " << to_string(method) << " γ " << gamma;
    }
  }
}

TEST(DecodeEngine, DraftEqualToTargetAcceptsEverything) {
  auto model = random_markov("m", 4, 2, 5);
  const auto ps = prompts(8, 4);
  const DecodeConfig config{.max_new_tokens = 20, .seed = 1, .gamma = 4};
  const auto r = speculative_decode(model, model, ps, config);
  EXPECT_EQ(r.metrics.acceptance_rate(), 1.0);
  EXPECT_NEAR(r.metrics.alpha_estimate(), 1.0, 1e-6);
  // 20 tokens in steps of γ+1 = 5: exactly 4 steps per request.
  EXPECT_EQ(r.metrics.steps, 8 * 4);
  for (const auto& t : r.tokens) EXPECT_EQ(t.size(), 20u);
}

TEST(DecodeEngine, MaxNewTokensIsExactWithRaggedGamma) {
  auto target = random_markov("target", 6, 1, 7);
  auto draft = random_markov("draft", 6, 1, 8);
  const auto ps = prompts(10, 6);
  for (int64_t max_new : {1, 2, 5, 13}) {
    const auto r =
        speculative_decode(target, draft, ps, {.max_new_tokens = max_new, .seed = 2, .gamma = 4});
    for (const auto& t : r.tokens) EXPECT_EQ(static_cast<int64_t>(t.size()), max_new);
    EXPECT_EQ(r.metrics.tokens, 10 * max_new);
    for (int32_t drafted : r.metrics.step_drafted)
      EXPECT_LE(drafted, std::min<int64_t>(4, max_new - 1));
  }
}

TEST(DecodeEngine, EosEndsTheSequenceAndCountsStayRight) {
  // Token 0 is EOS and is likely, so it often lands inside an accepted prefix.
  auto target = random_markov("target", 4, 1, 11, /*eos=*/0);
  auto draft = random_markov("draft", 4, 1, 12, /*eos=*/0);
  const auto ps = prompts(64, 4);
  const auto r =
      speculative_decode(target, draft, ps, {.max_new_tokens = 30, .seed = 4, .gamma = 5});
  int64_t total = 0, ended_by_eos = 0;
  for (const auto& t : r.tokens) {
    total += static_cast<int64_t>(t.size());
    const auto eos = std::find(t.begin(), t.end(), 0);
    if (eos != t.end()) {
      ++ended_by_eos;
      EXPECT_EQ(eos + 1, t.end()) << "tokens after EOS";
    } else {
      EXPECT_EQ(t.size(), 30u);
    }
  }
  EXPECT_GT(ended_by_eos, 0);
  const auto& m = r.metrics;
  EXPECT_EQ(m.tokens, total);
  EXPECT_EQ(std::accumulate(m.step_emitted.begin(), m.step_emitted.end(), int64_t{0}), total);
  EXPECT_EQ(std::accumulate(m.accepted_length_histogram.begin(), m.accepted_length_histogram.end(),
                            int64_t{0}),
            m.steps);
  for (size_t s = 0; s < m.step_emitted.size(); ++s) {
    EXPECT_LE(m.step_accepted[s], m.step_emitted[s]);
    EXPECT_LE(m.step_emitted[s], m.step_drafted[s] + 1);
  }
}

TEST(DecodeEngine, MetricsAreConsistent) {
  auto target = random_markov("target", 5, 2, 21);
  auto draft = random_markov("draft", 5, 1, 22);
  const auto ps = prompts(16, 5);
  const auto r =
      speculative_decode(target, draft, ps, {.max_new_tokens = 25, .seed = 9, .gamma = 3});
  const auto& m = r.metrics;
  EXPECT_EQ(m.position_reached[0], m.position_offered[0]);  // position 1 is always tested
  // From the step log (no EOS here, so step_accepted is the verifier's n): position i+1 is
  // tested iff i < min(n + 1, γ_b), offered iff i < γ_b, accepted iff i < n.
  std::vector<int64_t> reached(3, 0), offered(3, 0), accepted(3, 0);
  for (size_t s = 0; s < m.step_accepted.size(); ++s) {
    const int64_t n = m.step_accepted[s], g = m.step_drafted[s];
    for (int64_t i = 0; i < 3; ++i) {
      reached[i] += i < std::min(n + 1, g);
      offered[i] += i < g;
      accepted[i] += i < n;
    }
  }
  EXPECT_EQ(m.position_reached, reached);
  EXPECT_EQ(m.position_offered, offered);
  EXPECT_EQ(m.position_accepted, accepted);
  EXPECT_EQ(std::accumulate(m.position_accepted.begin(), m.position_accepted.end(), int64_t{0}),
            m.accepted_positions);
  EXPECT_GT(m.alpha_estimate(), 0.0);
  EXPECT_LT(m.alpha_estimate(), 1.0);
  // Call counts: one target call per step round, one draft call per draft position per round.
  EXPECT_GT(m.target.calls, 0);
  EXPECT_EQ(m.target.positions,
            m.steps + std::accumulate(m.step_drafted.begin(), m.step_drafted.end(), int64_t{0}));
  EXPECT_EQ(m.draft.positions,
            std::accumulate(m.step_drafted.begin(), m.step_drafted.end(), int64_t{0}));
}

TEST(DecodeEngine, PlainDecodeIsReproducibleAndSeedDependent) {
  auto model = random_markov("m", 6, 2, 31);
  const auto ps = prompts(8, 6);
  const auto a = plain_decode(model, ps, {.max_new_tokens = 30, .seed = 1});
  const auto b = plain_decode(model, ps, {.max_new_tokens = 30, .seed = 1});
  const auto c = plain_decode(model, ps, {.max_new_tokens = 30, .seed = 2});
  EXPECT_EQ(a.tokens, b.tokens);
  EXPECT_NE(a.tokens, c.tokens);
  EXPECT_EQ(a.metrics.target.calls, 30);
}

using testing::error_of;

TEST(DecodeEngine, RejectsBadInput) {
  auto target = random_markov("target", 5, 1, 1);
  auto small = random_markov("small-draft", 4, 1, 2);
  const auto ps = prompts(2, 4);
  EXPECT_THAT(error_of([&] { speculative_decode(target, small, ps, {}); }),
              HasSubstr("draft small-draft has vocabulary size 4 but target target has 5"));
  EXPECT_THAT(error_of([&] { speculative_decode(target, target, ps, {.gamma = -1}); }),
              HasSubstr("decode.gamma is -1"));
  const std::vector<std::vector<int32_t>> bad = {{1, 2}, {0, 9}};
  EXPECT_THAT(error_of([&] { plain_decode(target, bad, {}); }),
              HasSubstr("prompt 1 token 1 is 9; expected a token id in [0, 5)"));
  const std::vector<std::vector<int32_t>> empty_prompt = {{}};
  EXPECT_THAT(error_of([&] { plain_decode(target, empty_prompt, {}); }),
              HasSubstr("prompt 0 is empty"));
  EXPECT_THAT(error_of([&] { plain_decode(target, ps, {.max_new_tokens = 0}); }),
              HasSubstr("decode.max_new_tokens is 0"));
}

TEST(TrustingModel, ComputesRowsFromTheTokensTruncateVouchedFor) {
  // The premise of the cache tests below: a truncate that keeps a stale token changes the rows.
  TrustingModel model(random_markov("m", 5, 2, 81));
  auto table = random_markov("m", 5, 2, 81);
  const std::vector<int32_t> scored{0, 1, 2}, asked{0, 1, 3};
  model.score(std::vector<ScoreRequest>{{scored, 1, 7}}, {});
  model.truncate(7, 3);  // wrong: the sequence now ends in 3, not 2
  const auto wrong = model.score(std::vector<ScoreRequest>{{asked, 1, 7}}, {});
  EXPECT_EQ(model.stale_tokens(), 1);
  EXPECT_EQ(wrong, table.score(std::vector<ScoreRequest>{{scored, 1, 0}}, {}));
  model.truncate(7, 2);  // right: only the common prefix
  const auto right = model.score(std::vector<ScoreRequest>{{asked, 1, 7}}, {});
  EXPECT_EQ(model.stale_tokens(), 1);
  EXPECT_EQ(right, table.score(std::vector<ScoreRequest>{{asked, 1, 0}}, {}));
  EXPECT_EQ(model.cached(7), asked);
}

// Decodes with caching models that trust truncate() and with the stateless tables they wrap: the
// same seed must give the same tokens and steps, and no trusted cached token may be stale.
void expect_cache_follows_the_sequence(const DecodeConfig& config, const std::string& what) {
  const auto ps = prompts(6, 5);
  auto target = random_markov("target", 5, 2, 83);
  auto draft = random_markov("draft", 5, 2, 84);
  TrustingModel cached_target(target), cached_draft(draft);
  const auto expected = speculative_decode(target, draft, ps, config);
  const auto actual = speculative_decode(cached_target, cached_draft, ps, config);
  EXPECT_EQ(cached_target.stale_tokens(), 0) << what;
  EXPECT_EQ(cached_draft.stale_tokens(), 0) << what;
  // Booleans: a mismatch of 150 tokens says nothing the stale counts above do not.
  EXPECT_TRUE(actual.tokens == expected.tokens) << what << ": other tokens";
  EXPECT_TRUE(actual.metrics.step_accepted == expected.metrics.step_accepted)
      << what << ": other accepted lengths";
}

TEST(DecodeEngine, ChainStepLeavesNoRejectedDraftInTheCache) {
  for (const VerifierEntry& entry : verifier_registry()) {
    if (entry.family == VerifierFamily::kTree) continue;
    for (int64_t gamma : {1, 3}) {
      const DecodeConfig config{.max_new_tokens = 25,
                                .sampling = {.temperature = entry.name == "greedy" ? 0.0 : 1.0},
                                .seed = 9,
                                .gamma = gamma,
                                .verifier = make_verifier(entry.name)};
      expect_cache_follows_the_sequence(config, fmt::format("{} with γ = {}", entry.name, gamma));
    }
  }
}

TEST(DecodeEngine, TreeStepLeavesTheCacheOnTheAcceptedPath) {
  for (const VerifierEntry& entry : verifier_registry()) {
    if (entry.family != VerifierFamily::kTree) continue;
    for (const std::vector<int64_t>& branches : {std::vector<int64_t>{3, 2}, {2, 2, 2}}) {
      const DecodeConfig config{
          .max_new_tokens = 25, .seed = 9, .verifier = make_verifier(entry.name, branches)};
      expect_cache_follows_the_sequence(
          config, fmt::format("{} with branches [{}]", entry.name, fmt::join(branches, ", ")));
    }
  }
}

TEST(DecodeEngine, TreeSworStopsDrawingSiblingsWhenNoFixedPointMassIsLeft) {
  // A peaked draft: after its favourite token, every weight is 1e-20 < 2⁻⁵⁸, zero in the
  // sampler's fixed point, so no second sibling can be drawn. The drafter stops there, each node
  // has one child, and that tree is V1 on a chain with the same uniforms: the tokens must be the
  // token verifier's at γ = depth, a lossless verifier.
  constexpr int64_t kVocab = 5;
  std::vector<double> peaked(kVocab * kVocab, 1e-20);
  for (int64_t r = 0; r < kVocab; ++r) peaked[r * kVocab + (2 * r + 1) % kVocab] = 1.0 - 4e-20;
  MarkovModel draft("peaked", kVocab, 1, peaked);
  auto target = random_markov("target", kVocab, 1, 91);
  const auto ps = prompts(5, kVocab);
  for (const std::vector<int64_t>& branches : {std::vector<int64_t>{3, 2}, {2, 4, 3}}) {
    const int64_t depth = static_cast<int64_t>(branches.size());
    const DecodeConfig tree{
        .max_new_tokens = 30, .seed = 5, .verifier = make_verifier("tree-swor", branches)};
    const DecodeConfig chain{
        .max_new_tokens = 30, .seed = 5, .gamma = depth, .verifier = make_verifier("token")};
    const auto swor = speculative_decode(target, draft, ps, tree);
    const auto v1 = speculative_decode(target, draft, ps, chain);
    EXPECT_EQ(swor.tokens, v1.tokens) << "depth " << depth;
    EXPECT_EQ(swor.metrics.step_accepted, v1.metrics.step_accepted) << "depth " << depth;
    // One child per node: the target scored the chain's γ_b + 1 rows per step, no more.
    EXPECT_EQ(swor.metrics.target.positions, v1.metrics.target.positions) << "depth " << depth;
  }
}

}  // namespace
}  // namespace speclab

namespace speclab {
namespace {

TEST(DecodeEngine, EveryVerifierEqualsPlainGreedyAtTemperatureZero) {
  // p one-hot at the argmax: every lossless verifier (and V4, whose threshold a one-hot row
  // passes only at its argmax) emits the greedy chain.
  auto target = random_markov("target", 5, 2, 41);
  auto draft = random_markov("draft", 5, 1, 42);
  const auto ps = prompts(6, 5);
  DecodeConfig config{
      .max_new_tokens = 15, .sampling = {.temperature = 0.0}, .seed = 8, .gamma = 3};
  const auto plain = plain_decode(target, ps, config);
  for (const auto& name : verifier_names()) {
    config.verifier = make_verifier(name, {2, 2});
    const auto spec = speculative_decode(target, draft, ps, config);
    EXPECT_EQ(spec.tokens, plain.tokens) << name;
  }
}

TEST(DecodeEngine, EachVerifierIsTheOneThatRuns) {
  // The first step rebuilt here from decode.hpp's addresses: the drafts
  // x_i ~ q_i at (seed; b, 0, i, kDraftSample), the target's γ + 1 rows over them, and the named
  // verifier function called directly on that batch. The engine's tokens must be that function's
  // output: a dispatch that ran another verifier (or another verifier's parameters) would differ,
  // as V1, V5 and V4 consume different uniforms and accept differently.
  auto target = random_markov("target", 6, 1, 81);
  auto draft = random_markov("draft", 6, 1, 82);
  const auto ps = prompts(32, 6);
  constexpr int64_t kGamma = 3, kVocab = 6;
  constexpr uint64_t kSeed = 5;
  const SamplingParams draft_sampling{.temperature = 1.5};
  testing::OwnedChainBatch batch;
  batch.batch = static_cast<int64_t>(ps.size());
  batch.gamma = kGamma;
  batch.vocab = kVocab;
  for (size_t b = 0; b < ps.size(); ++b) {
    std::vector<int32_t> sequence = ps[b];
    for (int64_t i = 1; i <= kGamma; ++i) {
      const ScoreRequest request{sequence, 1, static_cast<int64_t>(b)};
      const auto q = draft.score(std::span(&request, 1), draft_sampling);
      const RandomAddress a{
          kSeed, static_cast<uint32_t>(b), 0, static_cast<uint32_t>(i), Purpose::kDraftSample, 0};
      const int32_t x = sample_categorical(q, philox_bits(a));
      batch.probs_draft.insert(batch.probs_draft.end(), q.begin(), q.end());
      batch.draft_tokens.push_back(x);
      sequence.push_back(x);
    }
    const ScoreRequest request{sequence, kGamma + 1, static_cast<int64_t>(b)};
    const auto p = target.score(std::span(&request, 1), SamplingParams{});
    batch.probs_target.insert(batch.probs_target.end(), p.begin(), p.end());
    batch.n_draft.push_back(static_cast<int32_t>(kGamma));
  }
  const auto step_tokens = [&](const ChainResult& r) {
    std::vector<std::vector<int32_t>> tokens(ps.size());
    for (size_t b = 0; b < ps.size(); ++b) {
      for (int64_t i = 0; i <= r.n_accepted[b]; ++i)
        tokens[b].push_back(r.emitted_tokens[b * (kGamma + 1) + i]);
    }
    return tokens;
  };
  const auto view = batch.view();
  const std::map<std::string, std::vector<std::vector<int32_t>>> expected{
      {"token", step_tokens(verify_chain(view, {.seed = kSeed, .step = 0}))},
      {"block", step_tokens(verify_block(view, {.seed = kSeed, .step = 0}))},
      {"typical", step_tokens(verify_typical(view, {.seed = kSeed, .step = 0}))}};
  for (const auto& [name, tokens] : expected) {
    DecodeConfig config{.max_new_tokens = kGamma + 1,
                        .draft_sampling = draft_sampling,
                        .seed = kSeed,
                        .gamma = kGamma,
                        .verifier = make_verifier(name)};
    const auto run = speculative_decode(target, draft, ps, config).tokens;
    for (size_t b = 0; b < ps.size(); ++b) {  // the first step's tokens begin each stream
      ASSERT_GE(run[b].size(), tokens[b].size());
      EXPECT_EQ(std::vector<int32_t>(run[b].begin(), run[b].begin() + tokens[b].size()), tokens[b])
          << name << " request " << b;
    }
  }
  EXPECT_NE(expected.at("token"), expected.at("block"));
  EXPECT_NE(expected.at("token"), expected.at("typical"));
}

TEST(DecodeEngine, TreeDecodingAcceptsEverythingWhenDraftEqualsTarget) {
  auto model = random_markov("m", 4, 2, 51);
  const auto ps = prompts(5, 4);
  for (const char* name : {"tree-iid", "tree-swor", "kseq", "traversal"}) {
    DecodeConfig config{
        .max_new_tokens = 12, .seed = 2, .verifier = make_verifier(name, {2, 2, 1})};
    const auto r = speculative_decode(model, model, ps, config);
    EXPECT_EQ(r.metrics.acceptance_rate(), 1.0) << name;
    // Depth 3: 4 tokens per step, 12 tokens in exactly 3 steps per request.
    EXPECT_EQ(r.metrics.steps, 5 * 3) << name;
    for (const auto& t : r.tokens) EXPECT_EQ(t.size(), 12u) << name;
  }
}

TEST(DecodeEngine, TreeDecodingCountsOneTargetCallPerStep) {
  auto target = random_markov("target", 6, 1, 61);
  auto draft = random_markov("draft", 6, 1, 62);
  const auto ps = prompts(3, 6);
  DecodeConfig config{
      .max_new_tokens = 20, .seed = 3, .verifier = make_verifier("tree-topk", {3, 2})};
  const auto r = speculative_decode(target, draft, ps, config);
  // Requests run in lock step: one target call and one draft call per depth per round.
  const int64_t rounds = r.metrics.target.calls;
  EXPECT_GT(rounds, 0);
  EXPECT_LE(r.metrics.draft.calls, 2 * rounds);
  int64_t total = 0;
  for (const auto& t : r.tokens) total += static_cast<int64_t>(t.size());
  EXPECT_EQ(total, 3 * 20);
  EXPECT_EQ(r.metrics.tokens, total);
}

TEST(DecodeEngine, TreeShapeIsValidated) {
  auto model = random_markov("m", 4, 1, 71);
  const auto ps = prompts(1, 4);
  DecodeConfig config{.verifier = make_verifier("tree-iid")};
  EXPECT_THAT(testing::error_of([&] { speculative_decode(model, model, ps, config); }),
              HasSubstr("decode.branches is empty"));
  config.verifier = make_verifier("tree-iid", {2, 0});
  EXPECT_THAT(testing::error_of([&] { speculative_decode(model, model, ps, config); }),
              HasSubstr("decode.branches[1] is 0; expected 1 ≤ k ≤ V = 4"));
}

}  // namespace
}  // namespace speclab
