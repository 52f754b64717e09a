// LlamaModel (core/models/llama.hpp) against the Eigen reference forward pass
// (tests/support/eigen_reference.hpp) on small LLaMA GGUF files with random weights
// (tests/support/random_llama.hpp), written to a temporary directory, so no model file is needed.
// Three shapes stress different paths: odd F32 shapes (head_dim 12, the serial attention dot
// product; rows not a multiple of 16), Q8_0 / Q4_1 blocks (head_dim 16, the 16-lane dot product;
// tied LM head) and F16 multi-query attention (head_dim 32, two vector chunks). Each is scored
// fresh at m = 1, 3, 8, 9 positions, after a cached prefix, after a rollback, and as a batch, in
// the fp32 storage: the reference is the float forward pass, and the quantised storage differs
// from it only in its products (8-bit activations; quant_matrix_test and weight_matrix_test
// check those against their own bound and reference, llama_storage_test the whole model).
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdint>
#include <filesystem>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "core/io/gguf.hpp"
#include "core/models/llama.hpp"
#include "tests/support/eigen_reference.hpp"
#include "tests/support/random_llama.hpp"

namespace speclab {
namespace {

using eigen_ref::all_close;
using eigen_ref::LlamaReference;
using eigen_ref::Matrix;
using testing::RandomLlamaSpec;

struct Case {
  std::string name;
  RandomLlamaSpec spec;
};

// ε = 1e-2 (SmolLM2: 1e-5) so that the ε term of RMSNorm moves the logits by far more than the
// tolerance: a kernel that dropped it would fail. Rope bases other than 10000 so that a kernel
// ignoring llama.rope.freq_base would fail.
std::vector<Case> cases() {
  return {
      {"f32-odd",
       {.n_layer = 2,
        .n_embd = 72,
        .n_head = 6,
        .n_head_kv = 2,
        .n_ff = 100,
        .vocab = 203,
        .rope_base = 5000.0f,
        .rms_eps = 1e-2f,
        .seed = 1}},
      {"q8-q4",
       {.n_layer = 3,
        .n_embd = 96,
        .n_head = 6,
        .n_head_kv = 3,
        .n_ff = 160,
        .vocab = 300,
        .rope_base = 100000.0f,
        .rms_eps = 1e-2f,
        .embd_type = GgmlType::kQ8_0,
        .attn_type = GgmlType::kQ8_0,
        .ffn_type = GgmlType::kQ4_1,
        .tied_output = true,
        .seed = 2}},
      {"f16-mqa",
       {.n_layer = 2,
        .n_embd = 64,
        .n_head = 2,
        .n_head_kv = 1,
        .n_ff = 48,
        .vocab = 77,
        .rope_base = 500.0f,
        .rms_eps = 1e-2f,
        .embd_type = GgmlType::kF16,
        .attn_type = GgmlType::kF16,
        .ffn_type = GgmlType::kF16,
        .seed = 3}},
  };
}

// A file per case and process (ctest runs tests in parallel processes).
std::filesystem::path write_case(const Case& c) {
  const auto path = std::filesystem::path(::testing::TempDir()) /
                    ("speclab-random-llama-" + c.name + "-" + std::to_string(::getpid()) + ".gguf");
  testing::write_random_llama(path, c.spec);
  return path;
}

std::vector<int32_t> random_tokens(int64_t n, int64_t vocab, uint64_t seed) {
  uint64_t s = seed;
  std::vector<int32_t> tokens(static_cast<size_t>(n));
  for (auto& t : tokens) {
    s = s * 6364136223846793005ULL + 1442695040888963407ULL;
    t = static_cast<int32_t>((s >> 33) % static_cast<uint64_t>(vocab));
  }
  return tokens;
}

// Model logits [Σm × V] row-major as a V × Σm matrix.
Matrix model_logits(LlamaModel& model, std::span<const ScoreRequest> requests) {
  const std::vector<float> raw = model.logits(requests);
  const int64_t v = model.vocab();
  return eigen_ref::columns(raw, v, static_cast<int64_t>(raw.size()) / v, v);
}

// The float forward pass of a few layers of width ≤ 160: every stage (products of ≤ 160 terms,
// RMSNorm, RoPE with float angles p·θ for p < 16, a softmax over ≤ 16 positions, SiLU) rounds
// with a relative error of at most ~k·u ≈ 1e-5, and RMSNorm rescales each layer's input, so
// errors add over the ~10 stages of a layer instead of compounding. Measured: ≤ 2e-6 of the
// logits' largest magnitude (≤ 8% of the allowed error). Allowed: 2e-5 of that largest
// magnitude (absolute) plus 2e-5 relative, an order of magnitude above what is seen and far
// below what a broken kernel gives (a wrong rope base, rope pairing, KV head or causal mask, a
// dropped ε: errors of 1e-3 to units).
::testing::AssertionResult matches(const std::string& what, const Matrix& got, const Matrix& want) {
  return all_close(what, got, want, 2e-5 * want.cwiseAbs().maxCoeff(), 2e-5);
}

// Fresh sequences of 13 tokens scored at their last m positions.
TEST(LlamaForward, FreshSequencesMatchEigenReference) {
  for (const Case& c : cases()) {
    const auto path = write_case(c);
    const LlamaReference ref(GgufFile::open(path));
    const auto tokens = random_tokens(13, c.spec.vocab, 7);
    {
      const WeightStorage storage = WeightStorage::kFp32;
      LlamaModel model(path, {}, storage);
      ASSERT_EQ(model.config().head_dim, ref.head_dim);
      int64_t id = 0;
      for (int64_t m : {1, 3, 8, 9}) {
        const ScoreRequest request{tokens, m, id++};
        EXPECT_TRUE(
            matches(c.name + " " + weight_storage_name(storage) + " m = " + std::to_string(m),
                    model_logits(model, {&request, 1}), ref.logits(tokens, m)));
      }
    }
    std::filesystem::remove(path);
  }
}

// The KV cache in use: a prefix of 6 tokens scored alone, then the whole 13 with m = 3 (positions
// 6 … 9 computed on top of the cached prefix), then a rollback to 5 tokens and a different
// continuation of 11 with m = 4, then one more token with m = 1 (a decode step).
TEST(LlamaForward, CachedPrefixAndRollbackMatchEigenReference) {
  for (const Case& c : cases()) {
    const auto path = write_case(c);
    const LlamaReference ref(GgufFile::open(path));
    LlamaModel model(path, {}, WeightStorage::kFp32);
    const auto tokens = random_tokens(13, c.spec.vocab, 8);
    const auto other = random_tokens(13, c.spec.vocab, 9);
    std::vector<int32_t> rolled(tokens.begin(), tokens.begin() + 5);
    rolled.insert(rolled.end(), other.begin(), other.begin() + 6);

    const ScoreRequest prefix{std::span(tokens).first(6), 1, 1};
    EXPECT_TRUE(matches(c.name + " prefix", model_logits(model, {&prefix, 1}),
                        ref.logits(prefix.tokens, 1)));
    const ScoreRequest whole{tokens, 3, 1};
    EXPECT_TRUE(matches(c.name + " after the prefix", model_logits(model, {&whole, 1}),
                        ref.logits(tokens, 3)));
    EXPECT_EQ(model.cached_length(1), 13);

    model.truncate(1, 5);
    const ScoreRequest rollback{rolled, 4, 1};
    EXPECT_TRUE(matches(c.name + " after the rollback", model_logits(model, {&rollback, 1}),
                        ref.logits(rolled, 4)));
    rolled.push_back(other[6]);
    const ScoreRequest step{rolled, 1, 1};
    EXPECT_TRUE(
        matches(c.name + " decode step", model_logits(model, {&step, 1}), ref.logits(rolled, 1)));
    std::filesystem::remove(path);
  }
}

// Three sequences in one call (1 + 9 + 3 rows), each with its own cache.
TEST(LlamaForward, BatchMatchesEigenReference) {
  for (const Case& c : cases()) {
    const auto path = write_case(c);
    const LlamaReference ref(GgufFile::open(path));
    LlamaModel model(path, {}, WeightStorage::kFp32);
    const auto a = random_tokens(4, c.spec.vocab, 10), b = random_tokens(12, c.spec.vocab, 11),
               d = random_tokens(7, c.spec.vocab, 12);
    const std::vector<ScoreRequest> requests = {{a, 1, 0}, {b, 9, 1}, {d, 3, 2}};
    Matrix want(c.spec.vocab, 13);
    want << ref.logits(a, 1), ref.logits(b, 9), ref.logits(d, 3);
    EXPECT_TRUE(matches(c.name + " batch", model_logits(model, requests), want));
    std::filesystem::remove(path);
  }
}

// The reference's own KV cache: appending in three chunks gives the logits of one pass over the
// whole sequence (double precision; only the order of a few sums differs).
TEST(LlamaForward, ReferenceCacheEqualsOnePass) {
  const Case c = cases()[1];
  const auto path = write_case(c);
  const LlamaReference ref(GgufFile::open(path));
  std::filesystem::remove(path);
  const auto tokens = random_tokens(13, c.spec.vocab, 13);
  LlamaReference::Cache cache;
  (void)ref.forward(cache, std::span(tokens).first(5), 1);
  (void)ref.forward(cache, std::span(tokens).subspan(5, 4), 2);
  const Matrix last = ref.forward(cache, std::span(tokens).subspan(9), 4);
  EXPECT_EQ(cache.length, 13);
  EXPECT_TRUE(all_close("chunked reference", last, ref.logits(tokens, 4), 1e-12, 1e-12));
}

}  // namespace
}  // namespace speclab
