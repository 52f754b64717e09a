// The cost and memory planner (core/plan/cost_model, core/plan/hardware): Leviathan's closed forms
// (docs/verifiers.md V1, proofs/expected_emitted.md), the roofline regimes, KV-cache and weight
// bytes of the presets, and the VRAM budget's errors.
#include "core/plan/cost_model.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <sstream>
#include <vector>

#include "core/base/error.hpp"
#include "core/plan/hardware.hpp"

namespace speclab {
namespace {

using ::testing::HasSubstr;

std::string read_text(const std::string& relative) {
  std::ifstream in(std::string(SPECLAB_SOURCE_DIR) + "/" + relative);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

std::string error_of(auto&& f) {
  try {
    f();
  } catch (const InvalidInput& e) {
    return e.what();
  }
  return "no InvalidInput thrown";
}

TEST(CostModel, ExpectedEmittedMatchesClosedForm) {
  // E = (1 − α^{γ+1})/(1 − α): α = 0.8, γ = 8 gives 5·(1 − 0.8⁹) = 4.32891136.
  EXPECT_NEAR(expected_emitted(0.8, 8), 4.32891136, 1e-12);
  EXPECT_DOUBLE_EQ(expected_emitted(0.8, 0), 1.0);
  EXPECT_DOUBLE_EQ(expected_emitted(1.0, 5), 6.0);  // every draft accepted: γ + 1
  EXPECT_DOUBLE_EQ(expected_emitted(0.0, 5), 1.0);  // none accepted: the residual token only
}

// Brute force for expected_rounds: every sequence of per-round outcomes of every request,
// enumerated with its probability (a request with r tokens left drafts min(γ, r − 1) and emits
// k ≤ drafts + 1 with P = α^(k−1)(1 − α) for k ≤ drafts, α^drafts for drafts + 1).
void rounds_law(double alpha, int64_t gamma, int64_t left, int64_t rounds, double p,
                std::vector<double>& law) {
  if (left == 0) {
    law[static_cast<size_t>(rounds)] += p;
    return;
  }
  const int64_t drafts = std::min(gamma, left - 1);
  for (int64_t k = 1; k <= drafts + 1; ++k) {
    const double pk = k <= drafts ? std::pow(alpha, static_cast<double>(k - 1)) * (1.0 - alpha)
                                  : std::pow(alpha, static_cast<double>(drafts));
    rounds_law(alpha, gamma, left - k, rounds + 1, p * pk, law);
  }
}

// Entry a: the expected number of rounds with exactly a requests still decoding, enumerating
// every tuple of the requests' round counts (a request needing s rounds is active in rounds
// 0 … s − 1).
std::vector<double> brute_force_rounds(double alpha, int64_t gamma, int64_t tokens, int64_t batch) {
  std::vector<double> law(static_cast<size_t>(tokens + 1), 0.0);  // P(one request needs s)
  rounds_law(alpha, gamma, tokens, 0, 1.0, law);
  std::vector<double> by_active(static_cast<size_t>(batch + 1), 0.0);
  std::vector<int64_t> pick(static_cast<size_t>(batch), 1);
  while (true) {
    double p = 1.0;
    for (const int64_t s : pick) p *= law[static_cast<size_t>(s)];
    for (int64_t round = 0; round < tokens; ++round) {
      const auto active =
          std::count_if(pick.begin(), pick.end(), [&](int64_t s) { return s > round; });
      if (active > 0) by_active[static_cast<size_t>(active)] += p;
    }
    size_t i = 0;
    while (i < pick.size() && ++pick[i] > tokens) pick[i++] = 1;
    if (i == pick.size()) break;
  }
  return by_active;
}

TEST(CostModel, ExpectedRoundsIsTheSlowestRequestsRoundsOfAFiniteRun) {
  // Every draft accepted: ⌈N/(γ+1)⌉ rounds, the last one drafting only what is left.
  EXPECT_DOUBLE_EQ(expected_rounds(1.0, 4, 32, 16), 7.0);
  EXPECT_DOUBLE_EQ(expected_rounds(1.0, 4, 30, 1), 6.0);
  // None accepted: one token per round.
  EXPECT_DOUBLE_EQ(expected_rounds(0.0, 4, 9, 3), 9.0);
  EXPECT_DOUBLE_EQ(expected_rounds(0.6, 0, 5, 2), 5.0);  // γ = 0 is plain decoding
  for (const double alpha : {0.3, 0.8}) {
    for (const int64_t gamma : {1, 2, 3}) {
      for (const int64_t tokens : {1, 4, 6}) {
        for (const int64_t batch : {1, 2, 3}) {
          const std::vector<double> want = brute_force_rounds(alpha, gamma, tokens, batch);
          const std::vector<double> got = expected_rounds_by_active(alpha, gamma, tokens, batch);
          ASSERT_EQ(got.size(), want.size());
          double total = 0.0;
          for (size_t a = 0; a < want.size(); ++a) {
            EXPECT_NEAR(got[a], want[a], 1e-12) << "α " << alpha << ", γ " << gamma << ", N "
                                                << tokens << ", B " << batch << ", active " << a;
            total += want[a];
          }
          // The batch's rounds: E[max over its requests].
          EXPECT_NEAR(expected_rounds(alpha, gamma, tokens, batch), total, 1e-12);
        }
      }
    }
  }
  // A batch waits for its slowest request: more rounds than one request needs on average.
  EXPECT_GT(expected_rounds(0.87, 4, 32, 16), expected_rounds(0.87, 4, 32, 1) + 1.0);
  EXPECT_THAT(error_of([] { expected_rounds(0.5, 2, 0, 1); }),
              ::testing::HasSubstr("expected gamma ≥ 0, tokens ≥ 1, batch ≥ 1"));
}

// Costs that depend on the active batch a and on γ in every term, so that a prediction pricing
// every round at the full batch, or leaving out a term, comes out different.
class LinearCosts final : public RoundCosts {
 public:
  double plain_step(int64_t a) const override { return 1.0 + 0.1 * static_cast<double>(a); }
  double drafting(int64_t a, int64_t g) const override {
    return static_cast<double>(g) * (0.05 + 0.02 * static_cast<double>(a));
  }
  double verify_pass(int64_t a, int64_t g) const override {
    return 1.0 + 0.04 * static_cast<double>(a * (g + 1));
  }
  double round_overhead(int64_t a, int64_t g) const override {
    return 0.01 * static_cast<double>(a * g);
  }
};

// predict_run's finite run against brute force: the expected speculative time is
// Σ_a (expected rounds with a requests active) · round(a, γ), the rounds enumerated over every
// tuple of the requests' outcomes (brute_force_rounds); plain decoding is tokens plain steps of
// the full batch.
TEST(CostModel, PredictRunIsTheBruteForceFiniteRun) {
  const LinearCosts costs;
  for (const double alpha : {0.3, 0.8}) {
    for (const int64_t gamma : {1, 2, 3}) {
      for (const int64_t tokens : {1, 4, 6}) {
        for (const int64_t batch : {1, 2, 3}) {
          const std::vector<double> rounds = brute_force_rounds(alpha, gamma, tokens, batch);
          double speculative = 0.0;
          for (int64_t a = 1; a <= batch; ++a) {
            const double r = static_cast<double>(gamma) * (0.05 + 0.02 * a) + 1.0 +
                             0.04 * static_cast<double>(a * (gamma + 1)) + 0.01 * a * gamma;
            speculative += rounds[static_cast<size_t>(a)] * r;
          }
          const double plain = static_cast<double>(tokens) * (1.0 + 0.1 * batch);
          const RunPrediction p = predict_run(costs, alpha, batch, gamma, tokens);
          EXPECT_NEAR(p.speculative_seconds, speculative, 1e-12 * speculative)
              << "α " << alpha << ", γ " << gamma << ", N " << tokens << ", B " << batch;
          EXPECT_NEAR(p.speedup, plain / speculative, 1e-12 * plain / speculative);
        }
      }
    }
  }
}

// Costs independent of the batch: a run's speculative time is then E[rounds] · round, so the
// finite run over the per-round model is N / (E · E[rounds of the slowest request]).
class ConstantCosts final : public RoundCosts {
 public:
  double plain_step(int64_t) const override { return 1.0; }
  double drafting(int64_t, int64_t g) const override { return 0.1 * static_cast<double>(g); }
  double verify_pass(int64_t, int64_t) const override { return 1.2; }
  double round_overhead(int64_t, int64_t) const override { return 0.05; }
};

// The per-round model E·T_plain/T_round is the limit of long runs: at batch 1 a run of N tokens
// takes N/E rounds plus at most one, so the two differ by O(E/N) (E ≈ 3.36, N = 4000: under
// 0.1%). A short run at a large batch waits for its slowest request: with constant costs the
// ratio is N / (E · E[rounds]), E[rounds] from brute force for B = 3, N = 6, γ = 3 (about
// 0.68); and 16 requests of 8 tokens at γ = 4 are further below (each needs ≥ 2 rounds, and the
// slowest of 16 more than 4 on average). Where the costs fall with the active batch, the
// rounds after requests finish cost less than the full batch's, so pricing every round at the
// full batch would under-predict.
TEST(CostModel, FiniteRunMeetsThePerRoundModelOnLongRunsAndNotOnShortBatchedOnes) {
  const LinearCosts linear;
  const RunPrediction long_run = predict_run(linear, 0.8, 1, 4, 4000);
  EXPECT_NEAR(long_run.speedup / long_run.per_round_speedup, 1.0, 1e-3);
  EXPECT_NEAR(long_run.per_round_speedup,
              expected_emitted(0.8, 4) * linear.plain_step(1) / linear.round(1, 4), 1e-12);

  const ConstantCosts constant;
  const std::vector<double> rounds = brute_force_rounds(0.8, 3, 6, 3);
  double total = 0.0;
  for (const double r : rounds) total += r;
  const RunPrediction small = predict_run(constant, 0.8, 3, 3, 6);
  EXPECT_NEAR(small.speedup / small.per_round_speedup, 6.0 / (expected_emitted(0.8, 3) * total),
              1e-12);
  EXPECT_LT(small.speedup, 0.7 * small.per_round_speedup);
  const RunPrediction batched = predict_run(constant, 0.8, 16, 4, 8);
  EXPECT_LT(batched.speedup, 8.0 / (expected_emitted(0.8, 4) * 4.0) * batched.per_round_speedup);

  // Falling costs: the finite run beats a run whose every round costs the full batch's.
  const RunPrediction falling = predict_run(linear, 0.8, 16, 4, 8);
  const double full_batch_priced =
      8.0 * linear.plain_step(16) / (expected_rounds(0.8, 4, 8, 16) * linear.round(16, 4));
  EXPECT_GT(falling.speedup, 1.1 * full_batch_priced);
  // The terms of the per-round model, in plain steps at the full batch.
  EXPECT_NEAR(falling.c, (0.05 + 0.02 * 16) / (1.0 + 0.1 * 16), 1e-12);
  EXPECT_NEAR(falling.r, (1.0 + 0.04 * 16 * 5) / (1.0 + 0.1 * 16), 1e-12);
  EXPECT_NEAR(falling.o, 0.01 * 16 * 4 / (1.0 + 0.1 * 16), 1e-12);
}

// Measured costs are linear in the batch between measured batch sizes and constant outside them.
TEST(CostModel, MeasuredCostsInterpolateLinearlyInTheBatch) {
  const MeasuredRoundCosts costs(
      {{.batch = 8,
        .plain_step = 5.0,
        .rounds = {{.gamma = 2, .drafting = 2.0, .verify_pass = 9.0, .overhead = 0.5}}},
       {.batch = 2,
        .plain_step = 2.0,
        .rounds = {{.gamma = 2, .drafting = 0.5, .verify_pass = 3.0, .overhead = 0.2}}}});
  EXPECT_DOUBLE_EQ(costs.plain_step(1), 2.0);      // below the smallest: its costs
  EXPECT_DOUBLE_EQ(costs.plain_step(5), 3.5);      // halfway from 2 to 8
  EXPECT_DOUBLE_EQ(costs.verify_pass(4, 2), 5.0);  // a third of the way: 3 + 6/3
  EXPECT_DOUBLE_EQ(costs.drafting(8, 2), 2.0);
  EXPECT_DOUBLE_EQ(costs.round_overhead(20, 2), 0.5);  // above the largest: its costs
  EXPECT_DOUBLE_EQ(costs.round(5, 2), 1.25 + 6.0 + 0.35);
  EXPECT_THAT(error_of([&] { costs.verify_pass(4, 3); }),
              HasSubstr("measured costs at batch 2 have no round at gamma 3"));
  EXPECT_THAT(error_of([] { MeasuredRoundCosts(std::vector<MeasuredBatchCost>{}); }),
              HasSubstr("at least one batch size"));
  EXPECT_THAT(error_of([] {
                MeasuredRoundCosts(std::vector<MeasuredBatchCost>{{.batch = 2}, {.batch = 2}});
              }),
              HasSubstr("name batch 2 twice"));
  EXPECT_THAT(error_of([] { MeasuredRoundCosts(std::vector<MeasuredBatchCost>{{.batch = 0}}); }),
              HasSubstr("batch ≥ 1"));
  EXPECT_THAT(error_of([] {
                MeasuredRoundCosts(
                    std::vector<MeasuredBatchCost>{{.batch = 1, .plain_step = std::nan("")}});
              }),
              HasSubstr("measured plain step at batch 1 is nan s"));
  EXPECT_THAT(error_of([] {
                MeasuredRoundCosts(std::vector<MeasuredBatchCost>{
                    {.batch = 1, .rounds = {{.gamma = 1, .drafting = -1.0}}}});
              }),
              HasSubstr("measured drafting at batch 1 is -1 s"));
}

TEST(CostModel, OptimalGammaIsEightWithGain309AtAlpha08C005) {
  // proofs/expected_emitted.md §3: gain(γ) = E/(γc + 1) with E = 5(1 − 0.8^{γ+1}).
  // γ = 7: 4.16114/1.35 = 3.0823; γ = 8: 4.32891/1.40 = 3.0921; γ = 9: 4.46313/1.45 = 3.0780,
  // and for γ ≥ 15 the gain is below 5/1.75 = 2.857 since E < 1/(1 − α) = 5: γ = 8 is global.
  const GammaChoice best = optimal_gamma(0.8, 0.05);
  EXPECT_EQ(best.gamma, 8);
  EXPECT_NEAR(best.gain, 4.32891136 / 1.4, 1e-9);
  EXPECT_NEAR(walltime_gain(0.8, 7, 0.05), 3.0823, 1e-4);
  EXPECT_NEAR(walltime_gain(0.8, 9, 0.05), 3.0780, 1e-4);
}

TEST(CostModel, RejectsAlphaOutsideUnitIntervalNamingIt) {
  EXPECT_THAT(error_of([] { expected_emitted(1.2, 4); }), HasSubstr("alpha is 1.2"));
  EXPECT_THAT(error_of([] { expected_emitted(std::nan(""), 4); }), HasSubstr("alpha"));
  EXPECT_THAT(error_of([] { walltime_gain(0.8, 4, -0.1); }), HasSubstr("c is -0.1"));
}

TEST(CostModel, KvCacheOfLlama3_8bIs128KiBPerToken) {
  // 32 layers × 8 KV heads × head dim 128 × 2 (K and V) × 2 bytes (bf16) = 131072 B = 128 KiB.
  EXPECT_EQ(find_llm("llama3-8b").kv_bytes_per_token(), 131072);
  // Llama-3.2-1B: 16 × 8 × 64 × 2 × 2 = 32768 B; Llama-2-13B (no GQA): 40 × 40 × 128 × 2 × 2.
  EXPECT_EQ(find_llm("llama3.2-1b").kv_bytes_per_token(), 32768);
  EXPECT_EQ(find_llm("llama2-13b-gptq").kv_bytes_per_token(), 819200);
}

TEST(CostModel, LayoutReproducesPublishedParameterCounts) {
  // Llama-3-8B: 2 × 128256 × 4096 (embeddings, untied head) + 32 × (q 4096² + k, v 2 × 4096 ×
  // 1024 + o 4096² + 3 × 4096 × 14336) + 65 × 4096 norms = 8,030,261,248.
  EXPECT_EQ(find_llm("llama3-8b").layout_parameters(), 8030261248);
  EXPECT_EQ(find_llm("llama3.2-1b").layout_parameters(), 1235814400);  // tied embeddings
  for (const ModelSpec& m : llm_presets()) {
    EXPECT_NEAR(static_cast<double>(m.layout_parameters()) / m.parameters, 1.0, 0.005) << m.name;
  }
}

TEST(CostModel, Int4WeightsCountGptqGroupScales) {
  // 4 bits plus one fp16 scale and one 4-bit zero per 128 weights: 0.5 + 2.5/128 bytes.
  EXPECT_DOUBLE_EQ(bytes_per_weight(WeightDtype::kInt4, 128), 0.51953125);
  EXPECT_DOUBLE_EQ(bytes_per_weight(WeightDtype::kFp8, 0), 1.0);
  // Llama-2-13B: 12.688e9 quantised block weights × 0.5195 + 327.7e6 fp16 embeddings, head and
  // norms × 2 = 7.25 GB (TheBloke's main-branch safetensors file is 7.26 GB).
  const double bytes = find_llm("llama2-13b-gptq").weight_bytes();
  EXPECT_GT(bytes, 7.2e9);
  EXPECT_LT(bytes, 7.3e9);
  EXPECT_NEAR(find_llm("llama3-8b").weight_bytes(), 2.0 * 8030261248.0, 1.0);
}

TEST(CostModel, RooflineIsMemoryBoundAtBatchOneAndComputeBoundAtLargeBatch) {
  const PassProfile llama = pass_profile(find_llm("llama3-8b"));
  const RooflineRates h100 = roofline_rates(find_gpu("h100-sxm"), WeightDtype::kBf16);
  const PassTime one = forward_time(llama, h100, 1, 1, 1024);
  EXPECT_FALSE(one.compute_bound);
  // Batch 1 streams ~15 GB of weights at 3.35 TB/s: ~4.5 ms, dwarfing 15 GFLOP at 989 TFLOP/s.
  EXPECT_NEAR(one.memory_seconds, 15.0e9 / 3.35e12, 0.2e-3);
  // 1024 sequences at a short context (128 tokens, so that their KV reads, 17 GB, do not
  // dominate): 1024 × 15 GFLOP = 15.4 TFLOP take 15.6 ms against 9.6 ms of memory traffic.
  const PassTime many = forward_time(llama, h100, 1024, 1, 128);
  EXPECT_TRUE(many.compute_bound);
  EXPECT_GT(many.seconds, 3 * one.seconds);
}

TEST(CostModel, StepReducesToLeviathanWhenVerificationCostsOneStep) {
  // No FLOPs, KV cache or overheads: every pass costs its weight bytes, so T(b, γ+1) = T(b, 1),
  // c = draft bytes / target bytes, and the speedup is exactly E/(γc + 1).
  const PassProfile target{.name = "t", .weight_bytes_read = 1e9, .vocab = 0};
  const PassProfile draft{.name = "d", .weight_bytes_read = 5e7, .vocab = 0};
  const RooflineRates rates{.bytes_per_second = 1e12, .flops_per_second = 1e12};
  const PairCostModel model{
      .target = target, .draft = draft, .target_rates = rates, .draft_rates = rates, .context = 0};
  const StepCost s = step_cost(model, 0.8, 1, 8);
  EXPECT_NEAR(s.c, 0.05, 1e-12);
  EXPECT_NEAR(s.speedup, walltime_gain(0.8, 8, 0.05), 1e-9);
  EXPECT_EQ(best_step(model, 0.8, 1, {}).gamma, 8);
}

TEST(CostModel, SpeculationStopsPayingAtLargeBatch) {
  // At a short context the verification pass of b(γ+1) tokens turns compute-bound and the
  // speedup falls with the batch until it is gone.
  const ModelSpec& t = find_llm("llama3-8b");
  const ModelSpec& d = find_llm("llama3.2-1b");
  const HardwareSpec gpu = find_gpu("rtx3090");
  const PairCostModel model{.target = pass_profile(t),
                            .draft = pass_profile(d),
                            .target_rates = roofline_rates(gpu, t.dtype),
                            .draft_rates = roofline_rates(gpu, d.dtype),
                            .context = 256};
  const double b1 = best_step(model, 0.8, 1, {}).speedup;
  const double b64 = best_step(model, 0.8, 64, {}).speedup;
  EXPECT_GT(b1, 1.5);
  EXPECT_LT(b64, b1);
  const auto even = break_even_batch(model, 0.8, {});
  ASSERT_TRUE(even.has_value());
  EXPECT_LE(best_step(model, 0.8, *even, {}).speedup, 1.0);
  EXPECT_GT(best_step(model, 0.8, *even - 1, {}).speedup, 1.0);
}

TEST(CostModel, DraftCostsConcurrentSequences) {
  const MemoryPlan m =
      plan_memory(find_llm("llama3-8b"), find_llm("llama3.2-1b"), find_gpu("a100-80gb"), 4096, 0.9);
  EXPECT_NEAR(m.draft_weight_bytes, 2.0 * 1235814400.0, 1.0);
  EXPECT_GT(m.max_sequences_without_draft, m.max_sequences_with_draft);
  EXPECT_EQ(m.sequences_lost_to_draft(),
            m.max_sequences_without_draft - m.max_sequences_with_draft);
  // Each sequence holds 4096 × (128 + 32) KiB of KV cache with the draft.
  const double per_sequence = 4096.0 * (131072 + 32768);
  EXPECT_LT(m.headroom_with_draft, per_sequence);
  EXPECT_GE(m.headroom_with_draft, 0.0);
}

TEST(CostModel, VramFitErrorsSayByHowMuch) {
  // Llama-3-70B holds 141 GB of bf16 weights; an RTX 3090 offers 24 GiB × 0.9 = 23.2 GB.
  const std::string too_big = error_of([] {
    plan_memory(find_llm("llama3-70b"), find_llm("llama3.2-1b"), find_gpu("rtx3090"), 2048, 0.9);
  });
  EXPECT_THAT(too_big, HasSubstr("does not fit in rtx3090"));
  EXPECT_THAT(too_big, HasSubstr("short by 118."));
  const std::string no_sequence = error_of([] {
    plan_memory(find_llm("llama3-8b"), find_llm("llama3.2-1b"), find_gpu("rtx3090"), 1 << 20, 0.9);
  });
  EXPECT_THAT(no_sequence, HasSubstr("no room for one sequence of 1048576 tokens"));
  EXPECT_THAT(error_of([] {
                plan_memory(find_llm("llama3-8b"), find_llm("llama3.2-1b"), find_gpu("h200"), 2048,
                            1.5);
              }),
              HasSubstr("--memory-utilization is 1.5"));
}

TEST(CostModel, UnknownPresetListsKnownOnes) {
  const std::string gpu = error_of([] { find_gpu("rtx9090"); });
  EXPECT_THAT(gpu, HasSubstr("unknown GPU preset 'rtx9090'"));
  EXPECT_THAT(gpu, HasSubstr("a100-80gb"));
  EXPECT_THAT(gpu, HasSubstr("this-machine"));
  EXPECT_THAT(error_of([] { find_llm("llama4"); }), HasSubstr("llama3.2-1b"));
  EXPECT_EQ(find_gpu("H100-SXM").name, "h100-sxm");  // names are case-insensitive
}

TEST(CostModel, PresetsMatchDataFiles) {
  const auto gpus = gpu_presets_from_toml(read_text("data/hardware.toml"), "data/hardware.toml");
  ASSERT_EQ(gpus.size(), gpu_presets().size());
  for (const HardwareSpec& g : gpus) {
    const HardwareSpec builtin = find_gpu(g.name);
    EXPECT_EQ(g.description, builtin.description) << g.name;
    EXPECT_EQ(g.memory_gib, builtin.memory_gib) << g.name;
    EXPECT_EQ(g.bandwidth_gbps, builtin.bandwidth_gbps) << g.name;
    EXPECT_EQ(g.fp16_tflops, builtin.fp16_tflops) << g.name;
    EXPECT_EQ(g.fp16_acc16_tflops, builtin.fp16_acc16_tflops) << g.name;
    EXPECT_EQ(g.fp8_tflops, builtin.fp8_tflops) << g.name;
    EXPECT_EQ(g.int8_tops, builtin.int8_tops) << g.name;
    EXPECT_EQ(g.fp32_tflops, builtin.fp32_tflops) << g.name;
    EXPECT_EQ(g.interconnect, builtin.interconnect) << g.name;
    EXPECT_EQ(g.interconnect_gbps, builtin.interconnect_gbps) << g.name;
  }
  const auto models =
      llm_presets_from_toml(read_text("data/llm_models.toml"), "data/llm_models.toml");
  ASSERT_EQ(models.size(), llm_presets().size());
  for (const ModelSpec& m : models) {
    const ModelSpec& b = find_llm(m.name);
    EXPECT_EQ(m.description, b.description) << m.name;
    EXPECT_EQ(m.layers, b.layers) << m.name;
    EXPECT_EQ(m.hidden, b.hidden) << m.name;
    EXPECT_EQ(m.intermediate, b.intermediate) << m.name;
    EXPECT_EQ(m.heads, b.heads) << m.name;
    EXPECT_EQ(m.kv_heads, b.kv_heads) << m.name;
    EXPECT_EQ(m.head_dim, b.head_dim) << m.name;
    EXPECT_EQ(m.vocab, b.vocab) << m.name;
    EXPECT_EQ(m.tied_embeddings, b.tied_embeddings) << m.name;
    EXPECT_EQ(m.parameters, b.parameters) << m.name;
    EXPECT_EQ(m.dtype, b.dtype) << m.name;
    EXPECT_EQ(m.group_size, b.group_size) << m.name;
    EXPECT_EQ(m.kv_dtype, b.kv_dtype) << m.name;
  }
}

TEST(CostModel, DataFileErrorsNameTheKey) {
  EXPECT_THAT(error_of([] { gpu_presets_from_toml("[gpus.x]\ndescription = \"x\"\n", "f.toml"); }),
              HasSubstr("[gpus.x] has no 'memory_gib'"));
  EXPECT_THAT(error_of([] { llm_presets_from_toml("[models", "m.toml"); }), HasSubstr("m.toml:1"));
}

}  // namespace
}  // namespace speclab
