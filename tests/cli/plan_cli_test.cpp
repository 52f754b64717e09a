// `speclab plan` run as a user runs it: JSON keys, HDF5 output, α from a result file, tensor
// parallelism and --target-config, `--validate`'s report on a tiny pair, and the exit status and
// message of bad input.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <string>

#include "core/io/hdf5_file.hpp"
#include "core/io/json.hpp"
#include "tests/support/cli_run.hpp"

namespace speclab {
namespace {

using testing::CliRun;
using ::testing::HasSubstr;
using ::testing::Not;
using testing::run_cli;

const std::string kSeed = "plan --gpu rtx3090 --target llama3-8b --draft llama3.2-1b ";

std::filesystem::path fresh_dir(const std::string& name) {
  const auto dir = std::filesystem::path(SPECLAB_BINARY_DIR) / "test-output" / name;
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  return dir;
}

TEST(PlanCli, JsonHasRowsBreakEvenAndVram) {
  const CliRun r = run_cli(kSeed + "--alpha 0.8 --batch 1,8 --json");
  ASSERT_EQ(r.status, 0) << r.output;
  for (const char* key : {"\"rows\": [{\"batch\": 1, \"gamma\": 4, \"speedup\": 2.0",
                          "{\"batch\": 8, \"gamma\": ", "\"break_even_batch\": ", "\"vram\": {",
                          "\"draft_weights_gb\": 2.47", "\"target_kv_bytes_per_token\": 131072",
                          "\"sequences_lost_to_draft\": ", "\"gamma_mode\": \"auto\""}) {
    EXPECT_THAT(r.output, HasSubstr(key));
  }
}

TEST(PlanCli, GammaListGivesOneColumnPerGamma) {
  const CliRun r = run_cli(kSeed + "--alpha 0.8 --batch 1 --gamma 2,5 --json");
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_THAT(r.output, HasSubstr("\"speedup_by_gamma\": {\"2\": "));
  EXPECT_THAT(r.output, HasSubstr(", \"5\": "));
  EXPECT_THAT(r.output, HasSubstr("\"gamma_mode\": \"list\""));
}

TEST(PlanCli, TableNamesBreakEvenAndVram) {
  const CliRun r = run_cli(kSeed + "--alpha 0.8");
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_THAT(r.output, HasSubstr("break-even batch"));
  EXPECT_THAT(r.output, HasSubstr("draft weights"));
  EXPECT_THAT(r.output, HasSubstr("lost to the draft"));
}

TEST(PlanCli, WritesHdf5WithOut) {
  const auto dir = fresh_dir("plan-out");
  const auto path = dir / "plan.h5";
  const CliRun r = run_cli(kSeed + "--alpha 0.8 --batch 1,2,4 --out '" + path.string() + "'");
  ASSERT_EQ(r.status, 0) << r.output;
  const Hdf5Reader file(path);
  EXPECT_EQ(file.read_string_attribute("schema"), "speclab.plan");
  EXPECT_DOUBLE_EQ(file.read_attribute<double>("alpha"), 0.8);
  const auto batch = file.read<int64_t>("rows/batch", 1);
  EXPECT_EQ(batch.values, (std::vector<int64_t>{1, 2, 4}));
  const auto speedup = file.read<double>("rows/speedup", 1);
  ASSERT_EQ(speedup.values.size(), 3u);
  EXPECT_GT(speedup.values[0], 1.5);
  EXPECT_EQ(file.dataset_shape("grid/speedup"), (std::vector<int64_t>{3, 7}));
  EXPECT_FALSE(std::filesystem::exists(dir / "plan.h5.partial"));
}

TEST(PlanCli, AlphaFromDemoResultUsesAlphaMeanBeta) {
  const auto dir = fresh_dir("plan-alpha-from");
  const CliRun demo =
      run_cli("demo --out '" + dir.string() + "' --batch 16 --gamma 2 --vocab 64 --steps 2");
  ASSERT_EQ(demo.status, 0) << demo.output;
  const CliRun r =
      run_cli(kSeed + "--alpha-from '" + (dir / "demo.h5").string() + "' --batch 1 --json");
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_THAT(r.output, HasSubstr("demo.h5:alpha_mean_beta\""));
}

TEST(PlanCli, UnknownPresetExitsTwoListingKnownOnes) {
  const CliRun r = run_cli("plan --gpu rtx9090 --target llama3-8b --draft llama3.2-1b --alpha 0.8");
  EXPECT_EQ(r.status, 2);
  EXPECT_THAT(r.output, HasSubstr("unknown GPU preset 'rtx9090'"));
  EXPECT_THAT(r.output, HasSubstr("h200"));
  const CliRun m = run_cli("plan --gpu h200 --target llama9 --draft llama3.2-1b --alpha 0.8");
  EXPECT_EQ(m.status, 2);
  EXPECT_THAT(m.output, HasSubstr("mistral-7b"));
}

TEST(PlanCli, ModelThatDoesNotFitExitsTwoSayingByHowMuch) {
  const CliRun r =
      run_cli("plan --gpu rtx3090 --target llama3-70b --draft llama3.2-1b --alpha 0.8");
  EXPECT_EQ(r.status, 2);
  EXPECT_THAT(r.output, HasSubstr("does not fit in rtx3090"));
  EXPECT_THAT(r.output, HasSubstr("short by"));
}

TEST(PlanCli, AlphaOutsideOpenUnitIntervalExitsTwo) {
  for (const char* alpha : {"1.2", "0", "1", "-0.5"}) {
    const CliRun r = run_cli(kSeed + "--alpha " + alpha);
    EXPECT_EQ(r.status, 2) << alpha;
    EXPECT_THAT(r.output, HasSubstr("expected 0 < alpha < 1")) << alpha;
  }
  const CliRun both = run_cli(kSeed);
  EXPECT_EQ(both.status, 2);
  EXPECT_THAT(both.output, HasSubstr("exactly one of --alpha"));
}

TEST(PlanCli, BadGammaListExitsTwo) {
  const CliRun r = run_cli(kSeed + "--alpha 0.8 --gamma 2,x");
  EXPECT_EQ(r.status, 2);
  EXPECT_THAT(r.output, HasSubstr("'x' is not an integer"));
  EXPECT_THAT(r.output, Not(HasSubstr("internal error")));
}

// The README's 70B example: on one H100 it names the smallest tensor-parallel size that fits (4;
// tests/unit/tensor_parallel_test.cpp derives it), and with that size it plans.
TEST(PlanCli, SeventyBTargetNamesTheTensorParallelSizeThatFitsAndRunsWithIt) {
  const std::string readme =
      "plan --gpu h100-sxm --target llama3-70b --draft llama3-8b --alpha 0.8";
  const CliRun alone = run_cli(readme);
  EXPECT_EQ(alone.status, 2) << alone.output;
  EXPECT_THAT(alone.output, HasSubstr("does not fit in h100-sxm"));
  EXPECT_THAT(alone.output, HasSubstr("pass --tensor-parallel-size 4"));
  const CliRun two = run_cli(readme + " --tensor-parallel-size 2");
  EXPECT_EQ(two.status, 2) << two.output;
  EXPECT_THAT(two.output, HasSubstr("pass --tensor-parallel-size 4"));
  const CliRun four = run_cli(readme + " --tensor-parallel-size 4");
  ASSERT_EQ(four.status, 0) << four.output;
  EXPECT_THAT(four.output, HasSubstr("tensor parallel over 4 GPUs"));
  EXPECT_THAT(four.output, HasSubstr("NVLink 4 at 450 GB/s"));
  EXPECT_THAT(four.output, HasSubstr("VRAM on h100-sxm, per GPU of 4"));
  EXPECT_THAT(four.output, HasSubstr("157 with"));  // sequences of 2048 tokens per GPU
  const CliRun json = run_cli(readme + " --tensor-parallel-size 8 --json");
  ASSERT_EQ(json.status, 0) << json.output;
  EXPECT_THAT(json.output,
              HasSubstr("\"tensor_parallel_size\": 8, \"interconnect\": \"NVLink 4\""));
  const CliRun three = run_cli(readme + " --tensor-parallel-size 3");
  EXPECT_EQ(three.status, 2) << three.output;
  EXPECT_THAT(three.output, HasSubstr("cannot be split over 3 GPUs"));
  const CliRun int4 = run_cli(
      "plan --gpu h100-sxm --target llama3-70b-int4 --draft llama3-8b "
      "--alpha 0.8");
  EXPECT_EQ(int4.status, 0) << int4.output;
}

TEST(PlanCli, TargetConfigReadsAHuggingFaceConfigAndNamesBadKeys) {
  const auto dir = fresh_dir("plan_target_config");
  const std::string config = R"({"hidden_size": 4096, "num_hidden_layers": 32,
    "num_attention_heads": 32, "num_key_value_heads": 8, "intermediate_size": 14336,
    "vocab_size": 128256, "torch_dtype": "bfloat16", "tie_word_embeddings": false,
    "rope_scaling": {"factor": 8.0, "rope_type": "llama3"}, "eos_token_id": [128001, 128009]})";
  std::ofstream(dir / "config.json") << config;
  const std::string args =
      "--gpu rtx4090 --draft llama3.2-1b --alpha 0.8 --batch 1 --json --target-config ";
  const CliRun r = run_cli("plan " + args + "'" + (dir / "config.json").string() + "'");
  ASSERT_EQ(r.status, 0) << r.output;
  // The Llama-3-8B layout: 8030261248 bf16 parameters = 16.06 GB, as the llama3-8b preset.
  const CliRun preset = run_cli(
      "plan --gpu rtx4090 --draft llama3.2-1b --alpha 0.8 --batch 1 --json --target llama3-8b");
  ASSERT_EQ(preset.status, 0) << preset.output;
  EXPECT_THAT(r.output, HasSubstr("\"target_weights_gb\": 16.0605"));
  EXPECT_THAT(preset.output, HasSubstr("\"target_weights_gb\": 16.0605"));

  std::ofstream(dir / "bad.json") << std::string(config).replace(config.find("\"vocab_size\""), 12,
                                                                 "\"vocab_sizes\"");
  const CliRun bad = run_cli("plan " + args + "'" + (dir / "bad.json").string() + "'");
  EXPECT_EQ(bad.status, 2) << bad.output;
  EXPECT_THAT(bad.output, HasSubstr("bad.json: vocab_size is missing"));
  const CliRun missing = run_cli("plan " + args + "'" + (dir / "none.json").string() + "'");
  EXPECT_EQ(missing.status, 2) << missing.output;
  EXPECT_THAT(missing.output, HasSubstr("cannot open the file"));
  const CliRun both = run_cli("plan " + args + "x.json --target llama3-8b");
  EXPECT_EQ(both.status, 2) << both.output;
  EXPECT_THAT(both.output, HasSubstr("one of --target PRESET and --target-config"));
}

// A number after "KEY": in one line of JSON (-1 for null).
double json_value(const std::string& json, const std::string& key) {
  const size_t at = json.find("\"" + key + "\": ");
  if (at == std::string::npos) return std::nan("");
  const std::string rest = json.substr(at + key.size() + 4);
  return rest.starts_with("null") ? -1.0 : std::stod(rest);
}

// At context 2048 on an RTX 3090 only 11 sequences fit beside the draft, while the speedup alone
// stays above 1 to a batch in the thousands: the break-even batch is "none", memory binding. At
// α = 0.5 and context 256 the speedup falls to 1 at a batch that fits, and the speedup binds.
TEST(PlanCli, BreakEvenBatchIsCappedByWhatFitsInMemory) {
  const CliRun memory = run_cli(kSeed + "--alpha 0.8 --batch 1 --json");
  ASSERT_EQ(memory.status, 0) << memory.output;
  const double fits = json_value(memory.output, "max_sequences_with_draft");
  const double ignoring = json_value(memory.output, "break_even_batch_ignoring_memory");
  EXPECT_GT(ignoring, fits) << memory.output;
  EXPECT_EQ(json_value(memory.output, "break_even_batch"), -1.0) << memory.output;
  EXPECT_THAT(memory.output, HasSubstr("\"break_even_limit\": \"memory\""));
  const CliRun table = run_cli(kSeed + "--alpha 0.8");
  EXPECT_THAT(table.output, HasSubstr("none\n    memory binds first"));

  const CliRun speed = run_cli(kSeed + "--alpha 0.5 --context 256 --batch 1 --json");
  ASSERT_EQ(speed.status, 0) << speed.output;
  const double even = json_value(speed.output, "break_even_batch");
  EXPECT_GT(even, 0.0) << speed.output;
  EXPECT_LE(even, json_value(speed.output, "max_sequences_with_draft")) << speed.output;
  EXPECT_EQ(even, json_value(speed.output, "break_even_batch_ignoring_memory"));
  EXPECT_THAT(speed.output, HasSubstr("\"break_even_limit\": \"speedup\""));
}

// A target of a family the presets lack gets its draft from a config.json too: the Qwen2.5-1.5B
// layout (28 layers, d = 1536, 2 KV heads of 128, tied 151936-token embedding) with the
// Qwen2.5-0.5B one (24 layers, d = 896): 1543714304 and 494032768 bf16 parameters, i.e. 3.087 and
// 0.988 GB of weights.
TEST(PlanCli, DraftConfigReadsAHuggingFaceConfig) {
  const auto dir = fresh_dir("plan_draft_config");
  std::ofstream(dir / "target.json") << R"({"hidden_size": 1536, "num_hidden_layers": 28,
    "num_attention_heads": 12, "num_key_value_heads": 2, "intermediate_size": 8960,
    "vocab_size": 151936, "torch_dtype": "bfloat16", "tie_word_embeddings": true})";
  std::ofstream(dir / "draft.json") << R"({"hidden_size": 896, "num_hidden_layers": 24,
    "num_attention_heads": 14, "num_key_value_heads": 2, "intermediate_size": 4864,
    "vocab_size": 151936, "torch_dtype": "bfloat16", "tie_word_embeddings": true})";
  const std::string configs = " --target-config '" + (dir / "target.json").string() +
                              "' --draft-config '" + (dir / "draft.json").string() + "'";
  const CliRun r = run_cli("plan --gpu rtx4090 --alpha 0.8 --batch 1 --json" + configs);
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_NEAR(json_value(r.output, "target_weights_gb"), 3.087, 0.001) << r.output;
  EXPECT_NEAR(json_value(r.output, "draft_weights_gb"), 0.988, 0.001) << r.output;
  const CliRun both =
      run_cli("plan --gpu rtx4090 --alpha 0.8 --draft llama3.2-1b --json" + configs);
  EXPECT_EQ(both.status, 2) << both.output;
  EXPECT_THAT(both.output, HasSubstr("one of --draft PRESET and --draft-config"));
  const CliRun other_vocab = run_cli(
      "plan --gpu rtx4090 --alpha 0.8 --target llama3-8b "
      "--draft-config '" +
      (dir / "draft.json").string() + "'");
  EXPECT_EQ(other_vocab.status, 2) << other_vocab.output;
  EXPECT_THAT(other_vocab.output, HasSubstr("needs the same vocabulary"));
}

// `plan --validate` on the 16-token LinearSoftmax pair, two rounds: every (batch, γ) of the grid
// is reported with its prediction, its measured median inside [min, max] over the rounds, its
// verdict and the four term effects; the interval of two rounds holds the median with
// probability 1 − 2^(1−2) = 0.5.
TEST(PlanCli, ValidateReportsEveryCellWithItsIntervalVerdictAndTerms) {
  const CliRun r = run_cli(
      "plan --validate --target lsm-tiny-target --draft lsm-tiny-draft --batch 1,2 --gamma 1,2 "
      "--tokens 8 --calibration-tokens 4 --rounds 2 --max-rounds 2 --json",
      true);
  ASSERT_EQ(r.status, 0) << r.output;
  const Json j = Json::parse(r.output);
  EXPECT_EQ(j["target"], "lsm-tiny-target");
  EXPECT_EQ(j["rounds"], 2);
  EXPECT_DOUBLE_EQ(j["interval_confidence"].get<double>(), 0.5);
  const double alpha = j["alpha_teacher_forced"].get<double>();
  EXPECT_GT(alpha, 0.0);
  EXPECT_LE(alpha, 1.0);
  // Teacher forcing scores every generated token of every timed plain run: 2 rounds × (1 + 2)
  // requests × 8 tokens.
  EXPECT_EQ(j["alpha_rows"], 2 * 3 * 8);
  ASSERT_EQ(j["rows"].size(), 2u);
  for (const Json& row : j["rows"]) {
    ASSERT_EQ(row["by_gamma"].size(), 2u);
    for (const Json& cell : row["by_gamma"]) {
      const double low = cell["measured_low"], mid = cell["measured"], high = cell["measured_high"];
      EXPECT_LE(low, mid);
      EXPECT_LE(mid, high);
      EXPECT_GT(cell["predicted"].get<double>(), 0.0);
      EXPECT_THAT(std::string(cell["verdict"]),
                  ::testing::AnyOf("within 10%", "inside interval", "outside"));
      ASSERT_EQ(cell["term_effects"].size(), 4u);
      EXPECT_EQ(cell["term_effects"][0]["term"], "emitted per round E");
      const double emitted = cell["terms_predicted"]["emitted"];
      EXPECT_GE(emitted, 1.0);
      EXPECT_LE(emitted, 1.0 + cell["gamma"].get<double>());
      EXPECT_TRUE(cell["roofline"].is_number());  // a LinearSoftmax pair
    }
  }
}

// Rounds go on past --rounds while an interval is wider than --precision, up to --max-rounds: a
// precision no timing meets (two rounds' ratios are never equal to 1e-12) runs every round
// allowed and says it was not reached; one every spread meets (half-widths below 100 times the
// median) stops at --rounds.
TEST(PlanCli, ValidateAddsRoundsUntilItsPrecision) {
  const std::string tiny =
      "plan --validate --target lsm-tiny-target --draft lsm-tiny-draft --batch 1 --gamma 2 "
      "--tokens 8 --calibration-tokens 4 --rounds 2 --max-rounds 4 ";
  const CliRun strict = run_cli(tiny + "--precision 1e-12 --json", true);
  ASSERT_EQ(strict.status, 0) << strict.output;
  const Json s = Json::parse(strict.output);
  EXPECT_EQ(s["rounds"], 4);
  EXPECT_EQ(s["max_rounds"], 4);
  EXPECT_GT(s["widest_interval"].get<double>(), 1e-12);
  const CliRun loose = run_cli(tiny + "--precision 0.99 --json", true);
  ASSERT_EQ(loose.status, 0) << loose.output;
  EXPECT_EQ(Json::parse(loose.output)["rounds"], 2);
  const CliRun text = run_cli(tiny + "--precision 1e-12", true);
  ASSERT_EQ(text.status, 0) << text.output;
  EXPECT_THAT(text.output, HasSubstr("not reached; raise --max-rounds or --tokens"));
}

TEST(PlanCli, ValidateRejectsBadRoundsAndThePlannersOwnOptions) {
  const CliRun rounds = run_cli("plan --validate --rounds 1");
  EXPECT_EQ(rounds.status, 2) << rounds.output;
  EXPECT_THAT(rounds.output, HasSubstr("--rounds is 1; expected ≥ 2"));
  const CliRun most = run_cli("plan --validate --rounds 5 --max-rounds 3");
  EXPECT_EQ(most.status, 2) << most.output;
  EXPECT_THAT(most.output, HasSubstr("--max-rounds is 3; expected ≥ --rounds (5)"));
  const CliRun precision = run_cli("plan --validate --precision 0");
  EXPECT_EQ(precision.status, 2) << precision.output;
  EXPECT_THAT(precision.output, HasSubstr("--precision is 0; expected a fraction"));
  const CliRun gpu = run_cli("plan --validate --gpu h200");
  EXPECT_EQ(gpu.status, 2) << gpu.output;
  EXPECT_THAT(gpu.output, HasSubstr("not --gpu"));
  const CliRun model = run_cli("plan --validate --target no-such-model --rounds 2");
  EXPECT_EQ(model.status, 2) << model.output;
  EXPECT_THAT(model.output, HasSubstr("unknown model \"no-such-model\""));
  const CliRun vocab = run_cli("plan --validate --target lsm-tiny-target --draft ngram-2");
  EXPECT_EQ(vocab.status, 2) << vocab.output;
  EXPECT_THAT(vocab.output, HasSubstr("has vocabulary size 256 but target lsm-tiny-target has 16"));
}

}  // namespace
}  // namespace speclab
