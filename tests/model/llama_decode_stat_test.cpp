// SPEC.md V1 on the real SmolLM2-135M with a real draft (TESTING.md "Statistical checks"): at
// T = 1 the first two tokens that speculative decoding emits follow the target's own law
// P(x1)·P(x2 | x1), computed exactly from the model's rows. Skipped without the model file.
#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <map>
#include <memory>
#include <vector>

#include "core/decode.hpp"
#include "core/gguf.hpp"
#include "core/model_registry.hpp"
#include "core/stats.hpp"
#include "core/tokenizer.hpp"
#include "tests/support/memo_model.hpp"
#include "tests/support/stat_support.hpp"

namespace speclab {
namespace {

const std::filesystem::path kModel =
    std::filesystem::path(SPECLAB_SOURCE_DIR) / "data/models/SmolLM2-135M-Instruct.Q4_1.gguf";

// One χ² check in this file: it takes the whole false-failure budget.
const double kAlpha = bonferroni_level(testing::kStatSuiteFalseFailureRate, 1);

// Bins: every sequence (x1, x2) — or (EOS) alone — with expected count N·P ≥ 20, and one "other"
// bin for the rest of the mass (chi_square_test merges further if needed). A prompt with a peaked
// answer puts most of the mass in a handful of such bins. N = 6000 with ~10 bins detects a TV
// distance of about 0.05 at power 0.99 (printed); requests are decoded in batches of 500.
TEST(SmolLM2Speculative, FirstTwoTokensFollowTheTargetUnderV1) {
  if (!std::filesystem::exists(kModel)) {
    GTEST_SKIP() << kModel.string() << " is absent; run `speclab fetch-model smollm2-135m`";
  }
  constexpr int64_t kN = 6000, kBatch = 500;
  const BpeTokenizer tokenizer(GgufFile::open(kModel));
  const std::vector<ChatMessage> chat = {{"user", "What is the capital of France?"}};
  const std::vector<int32_t> prompt = tokenizer.encode(tokenizer.apply_chat_template(chat));

  auto target_model = make_model("smollm2-135m");
  auto draft_model = make_model("layerskip:attn14-22,ffn20-23");
  testing::MemoModel target(*target_model), draft(*draft_model);
  const int32_t eos = target.eos_token();
  const SamplingParams t1{.temperature = 1.0};

  // The exact law, from the same rows the decoder sees.
  auto row = [&](const std::vector<int32_t>& tokens) {
    const ScoreRequest request{tokens, 1, 0};
    return target.score({&request, 1}, t1);
  };
  const std::vector<float> p1 = row(prompt);
  std::vector<std::vector<int32_t>> sequences;
  std::vector<double> probs;
  double listed = 0.0;
  for (int32_t x1 = 0; x1 < static_cast<int32_t>(p1.size()); ++x1) {
    if (kN * p1[x1] < kMinExpectedPerBin) continue;
    if (x1 == eos) {
      sequences.push_back({x1});
      probs.push_back(p1[x1]);
      listed += p1[x1];
      continue;
    }
    std::vector<int32_t> context = prompt;
    context.push_back(x1);
    const std::vector<float> p2 = row(context);
    for (int32_t x2 = 0; x2 < static_cast<int32_t>(p2.size()); ++x2) {
      const double p = static_cast<double>(p1[x1]) * p2[x2];
      if (kN * p < kMinExpectedPerBin) continue;
      sequences.push_back({x1, x2});
      probs.push_back(p);
      listed += p;
    }
  }
  ASSERT_GE(sequences.size(), 2u) << "the prompt's law is too flat for N = " << kN;
  const size_t other = sequences.size();
  probs.push_back(std::max(0.0, 1.0 - listed));
  std::map<std::vector<int32_t>, size_t> category;
  for (size_t i = 0; i < sequences.size(); ++i) category[sequences[i]] = i;

  // Speculative decoding: γ = 1 over two tokens, so a step drafts x1 ~ q, then emits either the
  // accepted x1 with a bonus x2 ~ p(· | x1), or a residual x1 and (next step) x2 ~ p(· | x1).
  const uint64_t seed = testing::stat_seed("first-two");
  DecodeConfig config{.max_new_tokens = 2, .sampling = t1, .draft_sampling = t1, .gamma = 1};
  set_verifier(config, "token");
  std::vector<int64_t> observed(probs.size(), 0);
  int64_t accepted = 0, tested = 0;
  for (int64_t done = 0; done < kN; done += kBatch) {
    const std::vector<std::vector<int32_t>> prompts(static_cast<size_t>(kBatch), prompt);
    config.seed = seed + static_cast<uint64_t>(done / kBatch);
    const DecodeResult result = speculative_decode(target, draft, prompts, config);
    for (const auto& tokens : result.tokens) {
      const auto it = category.find(tokens);
      ++observed[it == category.end() ? other : it->second];
    }
    accepted += result.metrics.accepted_positions;
    tested += result.metrics.tested_positions;
  }
  std::printf(
      "%zu listed sequences (mass %.4f); draft acceptance %.3f; rows computed: target %lld, "
      "draft %lld\n",
      sequences.size(), listed, static_cast<double>(accepted) / tested,
      static_cast<long long>(target.computed()), static_cast<long long>(draft.computed()));
  for (size_t i = 0; i < sequences.size(); ++i) {
    std::printf("  %-28s expected %8.1f observed %6lld\n", tokenizer.decode(sequences[i]).c_str(),
                kN * probs[i], static_cast<long long>(observed[i]));
  }
  std::printf("  %-28s expected %8.1f observed %6lld\n", "(other)", kN * probs[other],
              static_cast<long long>(observed[other]));
  const ChiSquareResult chi = chi_square_test(observed, probs);
  testing::report_chi_square("first-two", chi, kAlpha, seed);
  EXPECT_TRUE(testing::fits(chi, kAlpha, seed));
  // The draft must really be tested: a draft that is always rejected or always accepted would
  // leave one of V1's paths unexercised.
  EXPECT_GT(accepted, tested / 10);
  EXPECT_LT(accepted, tested - tested / 10);
}

}  // namespace
}  // namespace speclab
