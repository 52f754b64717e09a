// Chat workloads and `speclab bench decode` on the real SmolLM2-135M (experiments/workload.hpp,
// bench/bench_decode.cpp): prompts are the ChatML conversation tokenised by the model's
// tokenizer, generation stops at <|im_end|>, and bad prompt text (too long for the context,
// invalid UTF-8) exits 2 naming what is wrong. Skipped when `speclab fetch-model smollm2-135m`
// has not put the model in data/models/.
#include "experiments/workload.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

#include "core/decode/decode.hpp"
#include "core/io/gguf.hpp"
#include "core/models/model_registry.hpp"
#include "core/models/tokenizer.hpp"
#include "tests/support/cli_run.hpp"

namespace speclab::experiments {
namespace {

using ::testing::HasSubstr;
using testing::run_cli;

const std::filesystem::path kModel =
    std::filesystem::path(SPECLAB_SOURCE_DIR) / "data/models/SmolLM2-135M-Instruct.Q4_1.gguf";

#define SPECLAB_REQUIRE_MODEL()                                                              \
  if (!std::filesystem::exists(kModel)) {                                                    \
    GTEST_SKIP() << kModel.string()                                                          \
                 << " is absent; run `speclab fetch-model smollm2-135m` (downloads ~98 MB)"; \
  }

constexpr const char* kBench =
    "bench decode --target smollm2-135m --draft prompt-lookup-smollm2 --gamma 3 --tokens 6 ";

TEST(WorkloadModel, PromptsAreTheChatTemplateTokenised) {
  SPECLAB_REQUIRE_MODEL();
  const BpeTokenizer tokenizer(GgufFile::open(kModel));
  for (const std::string& name : workload_names()) {
    const Workload w = load_workload(name);
    const auto n = static_cast<int64_t>(w.conversations.size());
    const auto prompts = workload_prompts(w, "smollm2-135m", n + 1, 64);
    ASSERT_EQ(prompts.size(), static_cast<size_t>(n + 1));
    EXPECT_EQ(prompts[n], prompts[0]) << "request n takes conversation 0 again";
    for (int64_t j = 0; j < n; ++j) {
      // ChatML written out by hand (SmolLM2's template adds its system message first).
      const std::string expected =
          "<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging "
          "Face<|im_end|>\n<|im_start|>user\n" +
          w.conversations[j].back().content + "<|im_end|>\n<|im_start|>assistant\n";
      EXPECT_EQ(tokenizer.decode(prompts[j]), expected) << name << " " << j;
      EXPECT_EQ(prompts[j].front(), tokenizer.token_id("<|im_start|>"));
      EXPECT_EQ(prompts[j], tokenizer.encode(expected));
    }
  }
}

TEST(WorkloadModel, GenerationStopsAtImEnd) {
  SPECLAB_REQUIRE_MODEL();
  // A question with a one-line answer: greedy decoding ends the turn with <|im_end|> long
  // before the budget, in plain and in speculative decoding alike. ("Answer in one sentence."
  // gives the first token a clear margin, 1.5 logits in the fp32 storage: without it "The" leads
  // "L" by 0.08, a near-tie that the quantised storage's 8-bit activations may flip.)
  auto target = make_model("smollm2-135m");
  auto draft = make_model("prompt-lookup-smollm2");
  const int32_t im_end = BpeTokenizer(GgufFile::open(kModel)).token_id("<|im_end|>");
  ASSERT_EQ(target->eos_token(), im_end);
  const ChatTokenizer t = chat_tokenizer("smollm2-135m");
  const std::vector<ChatMessage> chat = {
      {"user", "What is the capital of France? Answer in one sentence."}};
  constexpr int64_t kBudget = 64;
  const std::vector<std::vector<int32_t>> prompts = {
      tokenize_conversation(t, chat, kBudget, "question")};
  DecodeConfig config{.max_new_tokens = kBudget, .sampling = {.temperature = 0.0}, .gamma = 4};
  const DecodeResult plain = plain_decode(*target, prompts, config);
  const std::vector<int32_t>& tokens = plain.tokens[0];
  std::printf("reply: %s\n", t.tokenizer.decode(tokens).c_str());
  ASSERT_FALSE(tokens.empty());
  EXPECT_EQ(tokens.back(), im_end);
  EXPECT_LT(static_cast<int64_t>(tokens.size()), kBudget);
  EXPECT_EQ(std::count(tokens.begin(), tokens.end(), im_end), 1);
  const DecodeResult spec = speculative_decode(*target, *draft, prompts, config);
  EXPECT_EQ(spec.tokens, plain.tokens);
}

TEST(WorkloadModel, BenchDecodeRunsTheWorkload) {
  SPECLAB_REQUIRE_MODEL();
  const testing::CliRun r = run_cli(std::string(kBench) + "--workload rewrite --json");
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_THAT(r.output, HasSubstr("\"prompts\": \"workload rewrite (3 conversations"));
  EXPECT_THAT(r.output, HasSubstr("\"gamma\": 3"));
  EXPECT_THAT(r.output, HasSubstr("\"stopped_at_eos\""));
}

TEST(WorkloadModel, PromptLongerThanTheContextExitsTwo) {
  SPECLAB_REQUIRE_MODEL();
  // 9000 repetitions of " word" (one token each), beyond the 8192-token context.
  const testing::CliRun r = run_cli(
      std::string(kBench) + "--prompt \"$(for i in $(seq 9000); do printf ' word'; done)\"");
  EXPECT_EQ(r.status, 2) << r.output.substr(0, 2000);
  EXPECT_THAT(r.output, HasSubstr("more than the context of smollm2-135m (8192 tokens)"));
}

TEST(WorkloadModel, InvalidUtf8PromptExitsTwoNamingTheOffset) {
  SPECLAB_REQUIRE_MODEL();
  // "caf", then 0xC3 (a two-byte lead) followed by '(' instead of a continuation byte.
  const testing::CliRun r = run_cli(std::string(kBench) + "--prompt \"$(printf 'caf\\303(')\"");
  EXPECT_EQ(r.status, 2) << r.output;
  EXPECT_THAT(r.output, HasSubstr("--prompt (user message): invalid UTF-8 at byte offset 3"));
}

}  // namespace
}  // namespace speclab::experiments
