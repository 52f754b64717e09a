// The suite must fail on deliberately broken verifiers (docs/testing.md "Mutants"). Each test
// switches one mutant of core/base/mutants.hpp on (this executable links speclab_core_mutants) and
// runs a check of the statistical layer, asserting that it REJECTS the mutant; with no mutant the
// same check passes (asserted too, so a check that rejects everything cannot pass for the wrong
// reason). Layers: "one-step joint" is the χ² of one verification step's emitted sequence against
// the exact rational law (core/exact); "stream" is the χ² of 4-token streams of the decoding engine
// against the target chain's exact joint law.
#include <gtest/gtest.h>

#include <map>

#include "core/base/mutants.hpp"
#include "core/base/philox.hpp"
#include "core/decode/decode.hpp"
#include "core/exact/exact.hpp"
#include "core/models/markov.hpp"
#include "core/sampling/sampling.hpp"
#include "core/stats/stats.hpp"
#include "core/verify/verify_block.hpp"
#include "core/verify/verify_chain.hpp"

namespace speclab {
namespace {

// Each check is a rejection at a level a correct implementation fails with probability 1e-9;
// the controls (no mutant) must pass at the same level.
constexpr double kAlpha = 1e-9;

using exact::Q;
using exact::Row;

Row rational_row(const std::vector<int>& w) {
  int total = 0;
  for (int x : w) total += x;
  Row row;
  for (int x : w) row.push_back(Q(x, total));
  return row;
}

// V = 4, γ = 3, position-dependent rows with zeros: every branch of V1 is reachable.
const std::vector<std::vector<int>> kTarget = {
    {1, 2, 3, 0}, {2, 0, 1, 3}, {1, 1, 1, 1}, {4, 1, 0, 2}};
const std::vector<std::vector<int>> kDraft = {{2, 1, 1, 1}, {1, 2, 2, 1}, {3, 1, 0, 1}};

enum class StepVerifier { kToken, kBlock };

// χ² of N sampled steps against the exact law of one step (sequences outside it are impossible
// categories: a single sample of one fails the test outright).
ChiSquareResult one_step_joint(StepVerifier verifier, uint64_t seed) {
  const int64_t v = 4, g = 3, n = 200000;
  std::vector<Row> target_rows, draft_rows;
  for (const auto& w : kTarget) target_rows.push_back(rational_row(w));
  for (const auto& w : kDraft) draft_rows.push_back(rational_row(w));
  const exact::StepResult law =
      verifier == StepVerifier::kBlock
          ? exact::enumerate_step(target_rows, draft_rows, exact::BlockMethod{})
          : exact::enumerate_step(target_rows, draft_rows, exact::Method{});

  std::vector<float> probs_target(n * (g + 1) * v), probs_draft(n * g * v);
  std::vector<int32_t> tokens(n * g);
  for (int64_t r = 0; r < n; ++r) {
    for (int64_t i = 0; i <= g; ++i) {
      for (int64_t t = 0; t < v; ++t) {
        probs_target[(r * (g + 1) + i) * v + t] = target_rows[i][t].convert_to<float>();
      }
    }
    for (int64_t i = 0; i < g; ++i) {
      float* q = &probs_draft[(r * g + i) * v];
      for (int64_t t = 0; t < v; ++t) q[t] = draft_rows[i][t].convert_to<float>();
      const RandomAddress a{
          seed, static_cast<uint32_t>(r), 0, static_cast<uint32_t>(i + 1), Purpose::kDraftSample,
          0};
      tokens[r * g + i] = sample_categorical({q, static_cast<size_t>(v)}, philox_bits(a));
    }
  }
  const ChainBatch batch{n, g, v, probs_target, probs_draft, tokens, {}, {}};
  const ChainResult result = verifier == StepVerifier::kBlock ? verify_block(batch, {.seed = seed})
                                                              : verify_chain(batch, {.seed = seed});

  std::map<exact::Sequence, int64_t> index;
  std::vector<double> probs;
  for (const auto& [sequence, q] : law.distribution) {
    index[sequence] = static_cast<int64_t>(probs.size());
    probs.push_back(q.convert_to<double>());
  }
  std::vector<int64_t> observed(probs.size(), 0);
  for (int64_t r = 0; r < n; ++r) {
    exact::Sequence emitted;
    for (int64_t i = 0; i <= g && result.emitted_tokens[r * (g + 1) + i] >= 0; ++i) {
      emitted.push_back(result.emitted_tokens[r * (g + 1) + i]);
    }
    auto it = index.find(emitted);
    if (it == index.end()) {
      it = index.emplace(emitted, static_cast<int64_t>(probs.size())).first;
      probs.push_back(0.0);
      observed.push_back(0);
    }
    ++observed[it->second];
  }
  return chi_square_test(observed, probs);
}

// χ² of 4-token engine streams after token 0 on a Markov pair against the target chain (plain
// decoding's streams when `plain`). Rows sum to 8; in every context the residual (p − q)⁺ has
// support 2 ((2, 1, 0), (0, 2, 2), (2, 0, 4) / 8), so its shape matters, not only its support.
ChiSquareResult stream(DecodeConfig config, uint64_t seed, bool plain = false) {
  const int weights_target[3][3] = {{4, 3, 1}, {0, 5, 3}, {3, 0, 5}};
  const int weights_draft[3][3] = {{2, 2, 4}, {4, 3, 1}, {1, 6, 1}};
  std::vector<double> t_table, d_table;
  exact::MarkovChain chain{3, {}};
  for (int a = 0; a < 3; ++a) {
    const std::vector<int> wt(weights_target[a], weights_target[a] + 3);
    chain.transition.push_back(rational_row(wt));
    for (int b = 0; b < 3; ++b) {
      t_table.push_back(weights_target[a][b] / static_cast<double>(wt[0] + wt[1] + wt[2]));
      d_table.push_back(
          weights_draft[a][b] /
          static_cast<double>(weights_draft[a][0] + weights_draft[a][1] + weights_draft[a][2]));
    }
  }
  MarkovModel target("target", 3, 1, t_table), draft("draft", 3, 1, d_table);
  config.max_new_tokens = 4;
  config.seed = seed;
  const std::vector<std::vector<int32_t>> prompts(120000, std::vector<int32_t>{0});
  const DecodeResult result = plain ? plain_decode(target, prompts, config)
                                    : speculative_decode(target, draft, prompts, config);
  const auto law = exact::chain_distribution(chain, 0, 4);
  std::vector<double> probs(81, 0.0);
  for (const auto& [sequence, q] : law) {
    probs[((sequence[0] * 3 + sequence[1]) * 3 + sequence[2]) * 3 + sequence[3]] =
        q.convert_to<double>();
  }
  std::vector<int64_t> observed(81, 0);
  for (const auto& t : result.tokens) ++observed[((t[0] * 3 + t[1]) * 3 + t[2]) * 3 + t[3]];
  return chi_square_test(observed, probs);
}

bool rejects(const ChiSquareResult& r) { return r.impossible() || r.p_value < kAlpha; }

void report(const char* what, const ChiSquareResult& r) {
  std::cout << "[mutant] " << ::testing::UnitTest::GetInstance()->current_test_info()->name() << " "
            << what << ": N=" << r.n << " bins=" << r.bins << " chi2=" << r.statistic
            << " p=" << r.p_value << (r.impossible() ? " (impossible outcome sampled)" : "")
            << std::endl;
}

void expect_step_caught(Mutant m, StepVerifier verifier) {
  const ChiSquareResult control = one_step_joint(verifier, 11);
  report("control", control);
  ASSERT_FALSE(rejects(control)) << "the check rejects the correct verifier";
  const ScopedMutant scoped(m);
  const ChiSquareResult r = one_step_joint(verifier, 11);
  report(std::string(to_string(m)).c_str(), r);
  EXPECT_TRUE(rejects(r)) << to_string(m) << " was not caught";
}

void expect_stream_caught(Mutant m, const DecodeConfig& config, bool plain = false) {
  const ChiSquareResult control = stream(config, 12, plain);
  report("control", control);
  ASSERT_FALSE(rejects(control)) << "the check rejects the correct engine";
  const ScopedMutant scoped(m);
  const ChiSquareResult r = stream(config, 12, plain);
  report(std::string(to_string(m)).c_str(), r);
  EXPECT_TRUE(rejects(r)) << to_string(m) << " was not caught";
}

TEST(Mutant, ResidualFromTargetIsCaughtByOneStepJoint) {
  expect_step_caught(Mutant::kResidualFromTarget, StepVerifier::kToken);
}

TEST(Mutant, MissingBonusIsCaughtByOneStepJoint) {
  expect_step_caught(Mutant::kMissingBonus, StepVerifier::kToken);
}

TEST(Mutant, ReusedUniformIsCaughtByOneStepJoint) {
  expect_step_caught(Mutant::kReusedUniform, StepVerifier::kToken);
}

TEST(Mutant, AcceptedOffByOneIsCaughtByOneStepJoint) {
  expect_step_caught(Mutant::kAcceptedOffByOne, StepVerifier::kToken);
}

TEST(Mutant, BlockFirstFailureIsCaughtByOneStepJoint) {
  expect_step_caught(Mutant::kBlockFirstFailure, StepVerifier::kBlock);
}

TEST(Mutant, DraftWarpingMismatchIsCaughtByStream) {
  // The draft samples at T = 0.5; the mutant verifies against its T = 1 distribution.
  expect_stream_caught(Mutant::kDraftWarpingMismatch,
                       {.draft_sampling = {.temperature = 0.5}, .gamma = 2});
}

TEST(Mutant, TopkSoftmaxQIsCaughtByStream) {
  DecodeConfig config{.verifier = make_verifier("tree-topk", {2, 2})};
  expect_stream_caught(Mutant::kTopkSoftmaxQ, config);
}

TEST(Mutant, TraversalStaleSiblingWeightIsCaughtByStream) {
  // Two candidates per node, depth 2: a second sibling is entered after the first one's deletion,
  // with the mutant's weight from the parent's state before it.
  DecodeConfig config{.verifier = make_verifier("traversal", {2, 2})};
  expect_stream_caught(Mutant::kTraversalStaleSiblingWeight, config);
}

TEST(Mutant, ResidualFromTargetIsCaughtByStream) {
  expect_stream_caught(Mutant::kResidualFromTarget, {.gamma = 2});
}

TEST(Mutant, BonusWithoutStepIsCaughtByStream) {
  // γ = 1: a 4-token stream can hold the bonus tokens of two steps, which the mutant draws with one
  // uniform.
  expect_stream_caught(Mutant::kBonusWithoutStep, {.gamma = 1});
}

TEST(Mutant, PlainUniformWithoutIndexIsCaughtByStream) {
  // Plain decoding with one uniform for all four tokens of a request.
  expect_stream_caught(Mutant::kPlainUniformWithoutIndex, {}, /*plain=*/true);
}

}  // namespace
}  // namespace speclab
