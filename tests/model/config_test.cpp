// Experiment configs with the real SmolLM2-135M as target (experiments/config.hpp, runner.hpp):
// a tiny version of experiments/configs/smollm2_prompt_lookup.toml runs end to end with workload
// prompts and writes its HDF5 results, and `speclab verify` checks the V = 49152 pair with a
// layer-skip draft at top-k = 16 (and explains why it needs a filter). Skipped when
// `speclab fetch-model smollm2-135m` has not put the model in data/models/.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <string>

#include "tests/support/cli_run.hpp"
#include "tests/support/experiment_fixture.hpp"

namespace speclab {
namespace {

namespace fs = std::filesystem;
using testing::fresh_test_dir;
using ::testing::HasSubstr;
using testing::run_cli;

const fs::path kModel =
    fs::path(SPECLAB_SOURCE_DIR) / "data/models/SmolLM2-135M-Instruct.Q4_1.gguf";
const std::string kConfig =
    "'" + std::string(SPECLAB_SOURCE_DIR) + "/experiments/configs/smollm2_prompt_lookup.toml'";

#define SPECLAB_REQUIRE_MODEL()                                                              \
  if (!fs::exists(kModel)) {                                                                 \
    GTEST_SKIP() << kModel.string()                                                          \
                 << " is absent; run `speclab fetch-model smollm2-135m` (downloads ~98 MB)"; \
  }

TEST(ConfigModel, TinyRunWritesHdf5WithWorkloadPrompts) {
  SPECLAB_REQUIRE_MODEL();
  const fs::path out = fresh_test_dir() / "out";
  const testing::CliRun run =
      run_cli("run " + kConfig + " --out '" + out.string() +
              "' --set decode.max_new_tokens=6 --set decode.sequences=1 "
              "--set 'sweep.sampling.temperature=[0.0]' --set 'sweep.decode.gamma=[3]'");
  ASSERT_EQ(run.status, 0) << run.output;
  EXPECT_THAT(run.output, HasSubstr("ran 1, skipped 0"));
  fs::path file;
  for (const auto& e : fs::directory_iterator(out)) {
    if (e.path().extension() == ".h5") file = e.path();
  }
  ASSERT_FALSE(file.empty()) << "no .h5 in " << out;
  EXPECT_TRUE(fs::exists(out / "summary.csv"));
  const testing::CliRun inspect = run_cli("inspect '" + file.string() + "'");
  ASSERT_EQ(inspect.status, 0) << inspect.output;
  EXPECT_THAT(inspect.output, HasSubstr("prompt_source = 'workload:rewrite'"));
  EXPECT_THAT(inspect.output, HasSubstr("model = 'smollm2-135m'"));
  EXPECT_THAT(inspect.output, HasSubstr("sequences/prompt_tokens"));
  EXPECT_THAT(inspect.output, HasSubstr("baseline/sequences/tokens"));
}

TEST(ConfigModel, VerifyExplainsThatAnUnfilteredSupportIsTooLarge) {
  SPECLAB_REQUIRE_MODEL();
  const testing::CliRun r =
      run_cli("verify --config " + kConfig +
              " --set 'sweep.sampling.temperature=[1.0]' --set 'sweep.decode.gamma=[3]'");
  EXPECT_EQ(r.status, 2) << r.output;
  EXPECT_THAT(r.output, HasSubstr("V = 49152"));
  EXPECT_THAT(r.output, HasSubstr("has more than 4096 outcomes"));
  EXPECT_THAT(r.output, HasSubstr("Set sampling.top_k"));
}

// With top-k = 16 the first two tokens have at most 256 sequences, and a layer-skip draft is both
// accepted and rejected (tests/model/llama_decode_slow_test.cpp), so V1 is tested end to end
// through the CLI on the real model: the memoised rows make 2 × 6000 decodes cheap.
TEST(ConfigModel, VerifyPassesWithTopK) {
  SPECLAB_REQUIRE_MODEL();
  const fs::path out = fresh_test_dir() / "topk.verify.h5";
  const testing::CliRun r = run_cli(
      "verify --config " + kConfig +
      " --set 'sweep.sampling.temperature=[1.0]' --set 'sweep.decode.gamma=[3]' --set "
      "sampling.top_k=16 --set draft.model=layerskip:attn14-22,ffn20-23 --length 2 --samples "
      "6000 --json --out '" +
      out.string() + "'");
  EXPECT_EQ(r.status, 0) << r.output;
  EXPECT_THAT(r.output, HasSubstr("\"pass\": true"));
  EXPECT_THAT(r.output, HasSubstr("\"length\": 2"));
  EXPECT_THAT(r.output, HasSubstr("\"draft_exercised\": true"));
  EXPECT_TRUE(fs::exists(out));
}

}  // namespace
}  // namespace speclab
