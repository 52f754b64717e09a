// LlamaModel's two weight storages (core/models/weight_matrix.hpp) on the real SmolLM2-135M: the
// quantised one (Q4_1 / Q8_0 blocks dequantised in registers) gives the fp32 one's logits bit for
// bit, hence the same greedy tokens, from the GGUF's own byte count. Skipped when `speclab
// fetch-model smollm2-135m` has not put the file in data/models/.
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <memory>
#include <vector>

#include "core/decode/decode.hpp"
#include "core/io/gguf.hpp"
#include "core/models/llama.hpp"

namespace speclab {
namespace {

const std::filesystem::path kModel =
    std::filesystem::path(SPECLAB_SOURCE_DIR) / "data/models/SmolLM2-135M-Instruct.Q4_1.gguf";

#define SPECLAB_REQUIRE_MODEL()                                                              \
  if (!std::filesystem::exists(kModel)) {                                                    \
    GTEST_SKIP() << kModel.string()                                                          \
                 << " is absent; run `speclab fetch-model smollm2-135m` (downloads ~98 MB)"; \
  }

LlamaModel& model(WeightStorage storage) {
  static std::unique_ptr<LlamaModel> fp32, quantised;
  auto& m = storage == WeightStorage::kFp32 ? fp32 : quantised;
  if (!m) m = std::make_unique<LlamaModel>(kModel, LayerSkip{}, storage);
  return *m;
}

// "The capital of France is Paris. The capital of Germany is Berlin. The capital of" (ids from
// tokenizer.ggml.tokens, as in llama_test.cpp).
const std::vector<int32_t> kTokens = {504, 3575, 282, 4649,  314, 7042, 30,   378, 3575,
                                      282, 4521, 314, 11452, 30,  378,  3575, 282};

TEST(LlamaStorage, WeightBytesAreTheGgufBlocks) {
  SPECLAB_REQUIRE_MODEL();
  // Every SmolLM2 matrix has a multiple of 16 rows, so the panels hold no padding: the quantised
  // storage is exactly the GGUF tensors' bytes and the fp32 one 4 bytes per element.
  const GgufFile file = GgufFile::open(kModel);
  int64_t gguf_bytes = 0, elements = 0;
  for (const GgufTensorInfo& t : file.tensor_infos()) {
    if (t.shape.size() == 2) {
      gguf_bytes += static_cast<int64_t>(t.n_bytes);
      elements += t.n_elements;
    }
  }
  EXPECT_EQ(model(WeightStorage::kQuantised).weight_bytes(), gguf_bytes);
  EXPECT_EQ(model(WeightStorage::kFp32).weight_bytes(), 4 * elements);
  std::printf("weights: quantised %.1f MB, fp32 %.1f MB\n", 1e-6 * static_cast<double>(gguf_bytes),
              4e-6 * static_cast<double>(elements));
}

TEST(LlamaStorage, QuantisedLogitsEqualFp32Bitwise) {
  SPECLAB_REQUIRE_MODEL();
  // m = 1 (one LM-head column) and m = 12 (two column tiles in every product).
  for (int64_t m : {1, 12}) {
    std::vector<std::vector<float>> logits;
    for (WeightStorage storage : {WeightStorage::kFp32, WeightStorage::kQuantised}) {
      LlamaModel& lm = model(storage);
      lm.release(1);
      const ScoreRequest request{kTokens, m, 1};
      logits.push_back(lm.logits({&request, 1}));
      lm.release(1);
    }
    ASSERT_EQ(logits[0].size(), logits[1].size());
    EXPECT_EQ(0, std::memcmp(logits[0].data(), logits[1].data(), logits[0].size() * sizeof(float)))
        << "m " << m;
  }
}

TEST(LlamaStorage, GreedyDecodeGivesTheSameTokens) {
  SPECLAB_REQUIRE_MODEL();
  const std::vector<std::vector<int32_t>> prompts = {{504, 3575, 282, 4649, 314}};
  const DecodeConfig config{
      .max_new_tokens = 24, .sampling = {.temperature = 0.0}, .seed = 1, .gamma = 4};
  const auto fp32 = plain_decode(model(WeightStorage::kFp32), prompts, config);
  const auto quantised = plain_decode(model(WeightStorage::kQuantised), prompts, config);
  EXPECT_EQ(quantised.tokens, fp32.tokens);
  ASSERT_FALSE(fp32.tokens.empty());
  std::printf("greedy:");
  for (int32_t t : fp32.tokens[0]) std::printf(" %d", t);
  std::printf("\n");
}

}  // namespace
}  // namespace speclab
