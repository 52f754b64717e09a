// Real drafts for the real target SmolLM2-135M (core/models/layer_skip, the token n-grams and
// prompt lookup of core/models/model_registry): layer-skip drafts share the target's weights and
// skip exactly the named sublayers; the token n-grams are distributions that model held-out text;
// and greedy speculative decoding with every draft gives plain greedy decoding's tokens
// (docs/verifiers.md V2). Skipped when `speclab fetch-model smollm2-135m` has not put the file in
// data/models/.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <numeric>
#include <string>
#include <vector>

#include "core/decode/decode.hpp"
#include "core/io/gguf.hpp"
#include "core/models/llama.hpp"
#include "core/models/model_registry.hpp"
#include "core/models/ngram.hpp"
#include "core/models/tokenizer.hpp"
#include "tests/support/error_of.hpp"

namespace speclab {
namespace {

using ::testing::AllOf;
using testing::error_of;
using ::testing::HasSubstr;

const std::filesystem::path kModel =
    std::filesystem::path(SPECLAB_SOURCE_DIR) / "data/models/SmolLM2-135M-Instruct.Q4_1.gguf";

#define SPECLAB_REQUIRE_MODEL()                                                              \
  if (!std::filesystem::exists(kModel)) {                                                    \
    GTEST_SKIP() << kModel.string()                                                          \
                 << " is absent; run `speclab fetch-model smollm2-135m` (downloads ~98 MB)"; \
  }

// The target for the suite; layer-skip drafts built while it lives share its weights.
LanguageModel& target() {
  static std::unique_ptr<LanguageModel> m = make_model("smollm2-135m");
  return *m;
}

const BpeTokenizer& tokenizer() {
  static const auto t = std::make_unique<BpeTokenizer>(GgufFile::open(kModel));
  return *t;
}

// A user turn in ChatML with the generation prompt, as the model is meant to be prompted.
std::vector<int32_t> chat_prompt(const std::string& user) {
  const std::vector<ChatMessage> messages = {{"user", user}};
  return tokenizer().encode(tokenizer().apply_chat_template(messages));
}

std::vector<float> logits_of(LlamaModel& model, std::span<const int32_t> tokens, int64_t m,
                             int64_t sequence_id) {
  model.release(sequence_id);
  const ScoreRequest request{tokens, m, sequence_id};
  auto out = model.logits({&request, 1});
  model.release(sequence_id);
  return out;
}

double max_abs_diff(std::span<const float> a, std::span<const float> b) {
  double worst = 0.0;
  for (size_t i = 0; i < a.size(); ++i) {
    worst = std::max(worst, std::abs(static_cast<double>(a[i]) - b[i]));
  }
  return worst;
}

std::unique_ptr<LlamaModel> layerskip(const std::string& spec) {
  std::unique_ptr<LanguageModel> model = make_model("layerskip:" + spec);
  if (dynamic_cast<LlamaModel*>(model.get()) == nullptr) {
    ADD_FAILURE() << "layerskip:" << spec << " is not a LlamaModel";
    return nullptr;
  }
  return std::unique_ptr<LlamaModel>(static_cast<LlamaModel*>(model.release()));
}

TEST(LayerSkipDraft, SharesTheTargetsWeights) {
  SPECLAB_REQUIRE_MODEL();
  auto& full = dynamic_cast<LlamaModel&>(target());
  const auto draft = layerskip("10-25");
  EXPECT_TRUE(draft->shares_weights_with(full));
  EXPECT_EQ(draft->skip().skipped_attention(), 16);
  EXPECT_EQ(draft->skip().skipped_ffn(), 16);
  EXPECT_THAT(draft->name(), HasSubstr("layerskip:10-25"));
  EXPECT_EQ(full.skip().skipped_attention() + full.skip().skipped_ffn(), 0);
  std::printf("layer-skip draft built in %.3f s beside a live target\n", draft->load_seconds());
}

TEST(LayerSkipDraft, OutOfRangeSpecNamesTheText) {
  SPECLAB_REQUIRE_MODEL();
  (void)target();
  EXPECT_THAT(error_of([] { make_model("layerskip:attn25-30"); }),
              AllOf(HasSubstr("'attn25-30'"), HasSubstr("out of range"), HasSubstr("30 layers")));
}

// With every attention sublayer skipped, no position sees another: the last row depends on the
// last token alone. The full model, which attends, does not have that property.
TEST(LayerSkipDraft, SkippingEveryAttentionMakesRowsContextFree) {
  SPECLAB_REQUIRE_MODEL();
  auto& full = dynamic_cast<LlamaModel&>(target());
  const std::vector<int32_t> a = {504, 3575, 282, 4649, 314};  // "The capital of France is"
  const std::vector<int32_t> b = {1035, 314};                  // another token, then " is"
  for (const char* spec : {"attn0-29", "0-29"}) {
    const auto draft = layerskip(spec);
    EXPECT_LT(max_abs_diff(logits_of(*draft, a, 1, 1), logits_of(*draft, b, 1, 2)), 1e-3) << spec;
  }
  EXPECT_GT(max_abs_diff(logits_of(full, a, 1, 1), logits_of(full, b, 1, 2)), 1.0);
}

// Skipping FFN sublayers only keeps attention (rows stay context-dependent) but changes the
// output; a skipped sublayer is really left out.
TEST(LayerSkipDraft, SkippingFfnChangesLogitsButKeepsContext) {
  SPECLAB_REQUIRE_MODEL();
  auto& full = dynamic_cast<LlamaModel&>(target());
  const auto draft = layerskip("ffn0-29");
  const std::vector<int32_t> a = {504, 3575, 282, 4649, 314};
  const std::vector<int32_t> b = {1035, 314};
  const auto draft_a = logits_of(*draft, a, 1, 1);
  EXPECT_GT(max_abs_diff(draft_a, logits_of(*draft, b, 1, 2)), 1.0);
  EXPECT_GT(max_abs_diff(draft_a, logits_of(full, a, 1, 1)), 1.0);
}

// The KV cache of a skipping model: m positions at once equal m single steps, and a rollback
// equals a fresh cache (layers whose attention is skipped keep no keys or values).
TEST(LayerSkipDraft, CacheRollbackAndBatchedScoringAgree) {
  SPECLAB_REQUIRE_MODEL();
  (void)target();
  const auto draft = layerskip("attn4-8,ffn10-12,20");
  const std::vector<int32_t> tokens = chat_prompt("Name a large city in France.");
  const int64_t m = 4, length = static_cast<int64_t>(tokens.size()), vocab = draft->vocab();
  const auto batched = logits_of(*draft, tokens, m, 7);
  draft->release(8);
  std::vector<float> single;
  for (int64_t j = 0; j < m; ++j) {
    const ScoreRequest one{std::span(tokens).first(length - m + 1 + j), 1, 8};
    const auto row = draft->logits({&one, 1});
    single.insert(single.end(), row.begin(), row.end());
  }
  EXPECT_LT(max_abs_diff(batched, single), 1e-3);
  EXPECT_EQ(draft->cached_length(8), length);
  // Roll back 3 tokens, score a different continuation, compare with a fresh cache.
  draft->truncate(8, length - 3);
  std::vector<int32_t> other(tokens.begin(), tokens.end() - 3);
  other.insert(other.end(), {504, 3575});
  const ScoreRequest again{other, 2, 8};
  const auto rolled = draft->logits({&again, 1});
  draft->release(8);
  EXPECT_LT(max_abs_diff(rolled, logits_of(*draft, other, 2, 9)), 1e-3);
  EXPECT_EQ(batched.size(), static_cast<size_t>(m * vocab));
}

// Bits per token of held-out corpus text: order 3 beats order 2 beats the uniform log2(49152).
TEST(SmolLM2NGram, ModelsHeldOutTextAndRowsAreDistributions) {
  SPECLAB_REQUIRE_MODEL();
  const auto corpus = load_corpus(default_corpus_path());
  const std::vector<int32_t> held_out =
      tokenizer().encode(std::string(corpus->held_out_text().substr(5000, 6000)));
  ASSERT_GT(held_out.size(), 1000u);
  std::vector<double> bits;
  for (const char* name : {"ngram2-smollm2", "ngram3-smollm2"}) {
    auto model = make_model(name);
    ASSERT_EQ(model->vocab(), 49152);
    const int64_t m = static_cast<int64_t>(held_out.size()) - 1;
    const ScoreRequest request{std::span(held_out).first(m), m, 0};
    const auto probs = model->score({&request, 1}, SamplingParams{});
    double total = 0.0;
    for (int64_t j = 0; j < m; ++j) {
      const float* row = &probs[static_cast<size_t>(j * 49152)];
      if (j % 250 == 0) {
        EXPECT_NEAR(std::accumulate(row, row + 49152, 0.0), 1.0, 1e-3) << name << " row " << j;
        EXPECT_GT(*std::min_element(row, row + 49152), 0.0f) << name << " row " << j;
      }
      total -= std::log2(static_cast<double>(row[held_out[static_cast<size_t>(j + 1)]]));
    }
    bits.push_back(total / static_cast<double>(m));
    std::printf("%s: %.3f bits per token on %lld held-out tokens\n", name, bits.back(),
                static_cast<long long>(m));
  }
  EXPECT_LT(bits[1], bits[0]);
  EXPECT_LT(bits[0], std::log2(49152.0) - 2.0);
}

// docs/verifiers.md V2: greedy verification emits plain greedy decoding's tokens whatever the
// draft. Each draft, γ ∈ {1, 4}, two chat prompts in one ragged batch (one that prompt lookup can
// copy from).
TEST(SmolLM2Drafts, GreedySpeculativeEqualsPlainGreedy) {
  SPECLAB_REQUIRE_MODEL();
  const std::vector<std::vector<int32_t>> prompts = {
      chat_prompt("Write a Python function that adds two numbers."),
      chat_prompt("Repeat after me: the quick brown fox jumps over the lazy dog.")};
  DecodeConfig config{.max_new_tokens = 12,
                      .sampling = {.temperature = 0.0},
                      .draft_sampling = {.temperature = 0.0},
                      .seed = 3};
  const auto plain = plain_decode(target(), prompts, config);
  config.verifier = make_verifier("greedy");
  for (const char* name :
       {"prompt-lookup-smollm2", "ngram3-smollm2", "layerskip:attn27-29", "layerskip:24-29"}) {
    auto draft = make_model(name);
    for (const int64_t gamma : {1, 4}) {
      config.gamma = gamma;
      const auto spec = speculative_decode(target(), *draft, prompts, config);
      EXPECT_EQ(spec.tokens, plain.tokens) << name << " γ=" << gamma;
      std::printf("%-22s γ=%lld: acceptance %.3f, %.2f tokens per step\n", name,
                  static_cast<long long>(gamma), spec.metrics.acceptance_rate(),
                  spec.metrics.emitted_per_step());
    }
  }
  std::printf("first reply: %s\n", tokenizer().decode(plain.tokens[0]).c_str());
}

}  // namespace
}  // namespace speclab
