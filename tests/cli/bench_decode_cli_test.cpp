// `speclab bench decode` with a real-model name but no usable model file (experiments/
// bench_decode.cpp, core/models/llama.cpp): a missing file names the fetch command, and a GGUF of
// another architecture or with a tensor type speclab cannot dequantise is a clear error with exit
// status 2, never a crash. The GGUF files are written byte by byte here; the real model is not
// needed (tests/model/ covers it).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <string_view>
#include <vector>

#include "core/io/gguf.hpp"
#include "tests/support/cli_run.hpp"
#include "tests/support/experiment_fixture.hpp"

namespace speclab {
namespace {

namespace fs = std::filesystem;
using testing::fresh_test_dir;
using ::testing::HasSubstr;
using testing::run_cli;
using T = GgufValueType;

constexpr const char* kBench =
    "bench decode --target smollm2-135m --draft prompt-lookup-smollm2 --tokens 8 --gamma 2";

// Little-endian GGUF (version 3) fields.
struct GgufWriter {
  std::string bytes;

  template <class V>
  GgufWriter& put(V v) {
    bytes.append(reinterpret_cast<const char*>(&v), sizeof v);
    return *this;
  }
  GgufWriter& str(std::string_view s) {
    put<uint64_t>(s.size());
    bytes.append(s);
    return *this;
  }
  GgufWriter& header(uint64_t n_tensors, uint64_t n_kv) {
    bytes.append("GGUF");
    return put<uint32_t>(3).put(n_tensors).put(n_kv);
  }
  GgufWriter& key_u32(std::string_view k, uint32_t v) {
    return str(k).put(static_cast<uint32_t>(T::kUint32)).put(v);
  }
  GgufWriter& key_f32(std::string_view k, float v) {
    return str(k).put(static_cast<uint32_t>(T::kFloat32)).put(v);
  }
  GgufWriter& key_str(std::string_view k, std::string_view v) {
    return str(k).put(static_cast<uint32_t>(T::kString)).str(v);
  }
  GgufWriter& pad() {  // the default alignment, 32
    while (bytes.size() % 32 != 0) bytes.push_back('\0');
    return *this;
  }
};

// A directory standing in for data/models/ with `bytes` under SmolLM2's file name; the CLI finds
// it through SPECLAB_MODELS for the duration of the test.
class FakeModelDir {
 public:
  explicit FakeModelDir(const std::string& bytes) : dir_(fresh_test_dir()) {
    if (!bytes.empty()) {
      std::ofstream(dir_ / "SmolLM2-135M-Instruct.Q4_1.gguf", std::ios::binary) << bytes;
    }
    ::setenv("SPECLAB_MODELS", dir_.c_str(), 1);
  }
  ~FakeModelDir() { ::unsetenv("SPECLAB_MODELS"); }

 private:
  fs::path dir_;
};

// The llama.* keys the loader reads before any tensor: 1 layer, d = 256, 1 head.
GgufWriter llama_header(uint64_t n_tensors) {
  GgufWriter w;
  w.header(n_tensors, 8)
      .key_str("general.architecture", "llama")
      .key_u32("llama.block_count", 1)
      .key_u32("llama.embedding_length", 256)
      .key_u32("llama.attention.head_count", 1)
      .key_u32("llama.attention.head_count_kv", 1)
      .key_u32("llama.feed_forward_length", 256)
      .key_u32("llama.context_length", 64)
      .key_f32("llama.attention.layer_norm_rms_epsilon", 1e-5f);
  return w;
}

TEST(BenchDecodeCli, MissingModelNamesTheFetchCommand) {
  const FakeModelDir models("");
  const testing::CliRun r = run_cli(kBench);
  EXPECT_EQ(r.status, 2) << r.output;
  EXPECT_THAT(r.output, HasSubstr("not found; run `speclab fetch-model smollm2-135m`"));
}

TEST(BenchDecodeCli, OtherArchitectureIsAClearError) {
  GgufWriter w;
  w.header(0, 1).key_str("general.architecture", "gpt2");
  const FakeModelDir models(w.bytes);
  const testing::CliRun r = run_cli(kBench);
  EXPECT_EQ(r.status, 2) << r.output;
  EXPECT_THAT(r.output, HasSubstr("general.architecture is 'gpt2'; expected 'llama'"));
}

TEST(BenchDecodeCli, UnsupportedTensorTypeIsAClearError) {
  // token_embd.weight [2 rows × 256] in Q6_K (256 elements per 210-byte block): the loader must
  // name the tensor and its type (and not die inside its parallel dequantisation loop).
  GgufWriter w = llama_header(1);
  w.str("token_embd.weight").put<uint32_t>(2).put<uint64_t>(256).put<uint64_t>(2);
  w.put(static_cast<uint32_t>(GgmlType::kQ6_K)).put<uint64_t>(0).pad();
  w.bytes.append(2 * 210, '\0');
  const FakeModelDir models(w.bytes);
  const testing::CliRun r = run_cli(kBench);
  EXPECT_EQ(r.status, 2) << r.output;
  EXPECT_THAT(r.output, HasSubstr("tensor 'token_embd.weight' has type Q6_K"));
}

TEST(BenchDecodeCli, WorkloadNeedsAModelWithATokenizer) {
  const testing::CliRun r =
      run_cli("bench decode --target ngram-3 --draft prompt-lookup --tokens 8 --workload rewrite");
  EXPECT_EQ(r.status, 2) << r.output;
  EXPECT_THAT(r.output, HasSubstr("--workload needs a target with a tokenizer"));
  EXPECT_THAT(r.output, HasSubstr("target ngram-3 has vocabulary size 256"));
}

}  // namespace
}  // namespace speclab
