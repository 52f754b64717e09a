// LlamaModel on the real SmolLM2-135M GGUF (30 layers, d 576, 9 query / 3 KV heads of 64, FFN
// 1536, vocab 49152, rope base 100000) against the Eigen reference forward pass of
// tests/support/eigen_reference.hpp over the same weights dequantised to float (the fp32 storage;
// llama_storage_test bounds the quantised one against it), fresh at m = 1,
// 3, 8, 9 positions and after a cached prefix. Skipped when `speclab fetch-model smollm2-135m`
// has not put the file in data/models/. The reference forward pass takes a few seconds.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

#include "core/io/gguf.hpp"
#include "core/models/llama.hpp"
#include "tests/support/eigen_reference.hpp"

namespace speclab {
namespace {

using eigen_ref::all_close;
using eigen_ref::Matrix;

const std::filesystem::path kModel =
    std::filesystem::path(SPECLAB_SOURCE_DIR) / "data/models/SmolLM2-135M-Instruct.Q4_1.gguf";

// "The capital of France is Paris. It is" as GPT-2 byte-level BPE tokens ("Ġ": a leading space),
// looked up by exact string in tokenizer.ggml.tokens.
std::vector<int32_t> prompt(const GgufFile& file) {
  const std::vector<std::string>& vocab = file.at("tokenizer.ggml.tokens").strings();
  std::vector<int32_t> ids;
  for (const char* w : {"The", "Ġcapital", "Ġof", "ĠFrance", "Ġis", "ĠParis", ".", "ĠIt", "Ġis"}) {
    const auto it = std::find(vocab.begin(), vocab.end(), w);
    EXPECT_NE(it, vocab.end()) << "token '" << w << "' is not in the vocabulary";
    ids.push_back(it == vocab.end() ? 0 : static_cast<int32_t>(it - vocab.begin()));
  }
  return ids;
}

Matrix model_logits(LlamaModel& model, const ScoreRequest& request) {
  const std::vector<float> raw = model.logits({&request, 1});
  return eigen_ref::columns(raw, model.vocab(), request.n_positions, model.vocab());
}

// The float forward pass through 30 layers of width 576 (FFN 1536) against double: each layer
// adds a relative error of a few 1e-6 of its activations and the residual stream carries them
// to the end. Measured: ≤ 1.1e-4 absolute, ≤ 4e-6 of the largest |logit| (≈ 30), ≤ 7% of the
// allowed. Allowed: 5e-5 of the largest |logit| plus 5e-5 relative, an order of magnitude above
// what is seen; a wrong rope base, rope pairing, KV head or norm moves logits by units.
::testing::AssertionResult matches(const std::string& what, const Matrix& got, const Matrix& want) {
  const auto result = all_close(what, got, want, 5e-5 * want.cwiseAbs().maxCoeff(), 5e-5);
  std::printf("%s\n", result.message());
  return result;
}

TEST(SmolLM2Reference, LogitsMatchEigenReference) {
  if (!std::filesystem::exists(kModel)) {
    GTEST_SKIP() << kModel.string()
                 << " is absent; run `speclab fetch-model smollm2-135m` (downloads ~98 MB)";
  }
  const GgufFile file = GgufFile::open(kModel);
  const std::vector<int32_t> tokens = prompt(file);
  const auto n = static_cast<int64_t>(tokens.size());
  const eigen_ref::LlamaReference ref(file);
  ASSERT_EQ(ref.head_dim, 64);
  // All 9 positions once; a fresh pass at m positions gives the last m columns.
  const Matrix want = ref.logits(tokens, n);

  LlamaModel model(kModel, {}, WeightStorage::kFp32);
  int64_t id = 0;
  for (int64_t m : {1, 3, 8, 9}) {
    const ScoreRequest request{tokens, m, id++};
    EXPECT_TRUE(
        matches("fresh m = " + std::to_string(m), model_logits(model, request), want.rightCols(m)));
  }
  // The KV cache: 5 tokens, then all 9 with m = 3 on top of the cached prefix.
  const ScoreRequest prefix{std::span(tokens).first(5), 1, 100};
  EXPECT_TRUE(matches("prefix of 5", model_logits(model, prefix), want.col(4)));
  const ScoreRequest rest{tokens, 3, 100};
  EXPECT_TRUE(matches("after the cached prefix", model_logits(model, rest), want.rightCols(3)));
  // The greedy choice agrees at every position.
  const Matrix got = model_logits(model, {tokens, n, id++});
  for (int64_t j = 0; j < n; ++j) {
    Eigen::Index best_got, best_want;
    got.col(j).maxCoeff(&best_got);
    want.col(j).maxCoeff(&best_want);
    EXPECT_EQ(best_got, best_want) << "position " << j;
  }
}

}  // namespace
}  // namespace speclab
