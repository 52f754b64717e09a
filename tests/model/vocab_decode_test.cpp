// Drafts of another vocabulary on the real model (core/decode/decode_vocab.hpp): SmolLM2-135M with
// the byte-level 5-gram and prompt-lookup drafts. Greedily every lossless verifier emits plain
// greedy decoding's tokens, so tli, slem and slrs must reproduce them token for token; at T = 1
// slem emits plain decoding's tokens by construction (sampled-match). The laws at T > 0 are the
// χ² checks of tests/stat/decode_vocab_stat_test.cpp and `speclab verify` with
// experiments/configs/verify_vocab_smollm2.toml (docs/vocabularies.md).
// Skipped when `speclab fetch-model smollm2-135m` has not put the file in data/models/.
#include <gtest/gtest.h>

#include <filesystem>
#include <memory>
#include <string>

#include "core/decode/decode.hpp"
#include "core/decode/decode_vocab.hpp"
#include "core/models/model_registry.hpp"
#include "core/models/tokenizer.hpp"

namespace speclab {
namespace {

const std::filesystem::path kModel =
    std::filesystem::path(SPECLAB_SOURCE_DIR) / "data/models/SmolLM2-135M-Instruct.Q4_1.gguf";

TEST(VocabDecodeModel, ByteDraftsReproducePlainDecodingOnSmolLM2) {
  if (!std::filesystem::exists(kModel)) {
    GTEST_SKIP() << kModel.string()
                 << " is absent; run `speclab fetch-model smollm2-135m` (downloads ~98 MB)";
  }
  auto target = make_model("smollm2-135m");
  const std::optional<ModelVocabulary> vocabulary = model_vocabulary("smollm2-135m");
  ASSERT_TRUE(vocabulary);
  // A prompt whose reply repeats text of the prompt, so that prompt lookup proposes.
  const std::vector<int32_t> prompt = vocabulary->encode(
      "<|im_start|>user\nRepeat after me: the quick brown fox jumps over the lazy "
      "dog.<|im_end|>\n<|im_start|>assistant\n");
  const std::vector<std::vector<int32_t>> prompts{prompt};
  for (const std::string draft_name : {"ngram-5", "prompt-lookup"}) {
    auto draft = make_model(draft_name);
    const auto bridge =
        model_vocab_bridge("smollm2-135m", target->vocab(), draft_name, draft->vocab());
    ASSERT_TRUE(bridge) << draft_name;
    for (const double temperature : {0.0, 1.0}) {
      DecodeConfig config{
          .max_new_tokens = 16, .sampling = {.temperature = temperature}, .seed = 5, .gamma = 4};
      const DecodeResult plain = plain_decode(*target, prompts, config);
      for (const std::string method : {"tli", "slem", "slrs"}) {
        // At T = 1 only slem is pathwise plain decoding; tli and slrs are lossless in law.
        if (temperature > 0.0 && method != "slem") continue;
        config.verifier = make_verifier(method);
        const DecodeResult spec =
            vocab_speculative_decode(*target, *draft, *bridge, prompts, config);
        EXPECT_EQ(spec.tokens, plain.tokens)
            << method << " with " << draft_name << " at T = " << temperature;
        EXPECT_EQ(spec.metrics.tokens, 16) << method << " with " << draft_name;
      }
    }
  }
}

}  // namespace
}  // namespace speclab
