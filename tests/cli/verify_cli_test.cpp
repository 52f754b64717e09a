// `speclab verify`: passes the shipped lossless config, catches the lossy variant, enumerates only
// the support under top-k, exits 3 when L = 1 leaves the draft out, shows progress, rejects bad
// input (an unusable --out included) with exit status 2.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>

#include "core/io/hdf5_file.hpp"
#include "tests/support/cli_run.hpp"

namespace speclab {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;
using testing::run_cli;

std::string config() {
  return std::string("--config '") + SPECLAB_SOURCE_DIR + "/experiments/configs/verify_token.toml'";
}

std::string out(const char* name) {
  const auto dir = std::filesystem::path(SPECLAB_BINARY_DIR) / "test-output" / "verify";
  std::filesystem::create_directories(dir);
  return " --out '" + (dir / name).string() + "'";
}

TEST(VerifyCli, LosslessConfigPasses) {
  const auto r =
      run_cli("verify " + config() + " --length 2 --samples 60000 --json" + out("token.h5"));
  EXPECT_EQ(r.status, 0) << r.output;
  for (const char* key :
       {"\"pass\": true", "\"p_value\"", "\"samples\": 60000", "\"epsilon_detectable\""}) {
    EXPECT_THAT(r.output, HasSubstr(key));
  }
}

// The shipped config's comment says what `speclab verify` does with it by default: the tokens per
// sample and the outcomes it tests (a few samples suffice to see both).
TEST(VerifyCli, ShippedConfigCommentStatesTheDefaultLengthAndOutcomes) {
  const auto r = run_cli("verify " + config() + " --samples 20000 --json" + out("comment.h5"));
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_THAT(r.output, HasSubstr("\"length\": 3"));
  EXPECT_THAT(r.output, HasSubstr("\"outcomes\": 4096"));
  std::ifstream in(std::string(SPECLAB_SOURCE_DIR) + "/experiments/configs/verify_token.toml");
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_THAT(text, HasSubstr("the first three tokens"));
  EXPECT_THAT(text, HasSubstr("(4096 outcomes)"));
}

TEST(VerifyCli, OneReportIntoANewDirectoryMakesIt) {
  // CI writes results/verify/token.h5 into a fresh checkout, where results/verify is missing.
  const auto dir = std::filesystem::path(SPECLAB_BINARY_DIR) / "test-output" / "verify-new";
  std::filesystem::remove_all(dir);
  const auto report = dir / "sub" / "token.h5";
  const auto r =
      run_cli("verify " + config() + " --length 2 --samples 20000 --out '" + report.string() + "'");
  EXPECT_EQ(r.status, 0) << r.output;
  EXPECT_TRUE(std::filesystem::is_regular_file(report)) << r.output;
}

// The report carries the expected count of every outcome beside its exact probability:
// expected_count = samples × expected, summing to the samples drawn, and its schema version.
TEST(VerifyCli, ReportHoldsExpectedCountsBesideProbabilities) {
  const auto dir = std::filesystem::path(SPECLAB_BINARY_DIR) / "test-output" / "verify-counts";
  std::filesystem::remove_all(dir);
  const auto report = dir / "token.h5";
  const auto r =
      run_cli("verify " + config() + " --length 2 --samples 20000 -q -o '" + report.string() + "'");
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_EQ(r.output, "") << "--quiet prints nothing when the check passes";
  const Hdf5Reader file(report.string());
  EXPECT_EQ(file.read_attribute<int64_t>("schema_version"), 2);
  const int64_t samples = file.read_attribute<int64_t>("samples");
  ASSERT_EQ(samples, 20000);
  const auto probability = file.read<double>("expected").values;
  const auto count = file.read<double>("expected_count").values;
  const auto observed = file.read<int64_t>("observed").values;
  ASSERT_EQ(count.size(), probability.size());
  ASSERT_EQ(observed.size(), probability.size());
  double total = 0.0;
  int64_t observed_total = 0;
  for (size_t i = 0; i < count.size(); ++i) {
    EXPECT_DOUBLE_EQ(count[i], probability[i] * static_cast<double>(samples)) << i;
    total += count[i];
    observed_total += observed[i];
  }
  EXPECT_NEAR(total, static_cast<double>(samples), 1e-6 * static_cast<double>(samples));
  EXPECT_EQ(observed_total, samples);
}

// The config is positional, as for run, validate and expand (--config stays an alias), and -o is
// --out, as for every command that writes.
TEST(VerifyCli, ConfigIsPositionalAndOIsOut) {
  const auto dir = std::filesystem::path(SPECLAB_BINARY_DIR) / "test-output" / "verify-positional";
  std::filesystem::remove_all(dir);
  const auto report = dir / "token.h5";
  const auto r = run_cli(std::string("verify '") + SPECLAB_SOURCE_DIR +
                         "/experiments/configs/verify_token.toml' --length 2 --samples 20000 -o '" +
                         report.string() + "'");
  EXPECT_EQ(r.status, 0) << r.output;
  EXPECT_TRUE(std::filesystem::is_regular_file(report)) << r.output;
  const auto none = run_cli("verify --length 2");
  EXPECT_EQ(none.status, 2) << none.output;
  EXPECT_THAT(none.output, HasSubstr("config"));
}

TEST(VerifyCli, LenientIsCaught) {
  const auto r = run_cli("verify " + config() +
                         " --set verifier.method=lenient --set verifier.leniency=0.5 --length 2 "
                         "--samples 60000 --json" +
                         out("lenient.h5"));
  EXPECT_EQ(r.status, 1) << r.output;
  EXPECT_THAT(r.output, HasSubstr("\"pass\": false"));
}

// With top-k = 4 the support of two tokens has 4² = 16 sequences (plus the category outside it),
// and the length picked by default is the longest whose support fits in 4096: 4⁶.
TEST(VerifyCli, TopKEnumeratesOnlyTheSupport) {
  auto r = run_cli("verify " + config() +
                   " --set sampling.top_k=4 --length 2 --samples 20000 --json" + out("topk.h5"));
  EXPECT_EQ(r.status, 0) << r.output;
  EXPECT_THAT(r.output, HasSubstr("\"pass\": true"));
  EXPECT_THAT(r.output, HasSubstr("\"support\": 16,"));
  r = run_cli("verify " + config() + " --set sampling.top_k=4 --samples 20000 --json" +
              out("topk-auto.h5"));
  EXPECT_EQ(r.status, 0) << r.output;
  EXPECT_THAT(r.output, HasSubstr("\"length\": 6,"));
  EXPECT_THAT(r.output, HasSubstr("\"support\": 4096,"));
}

// At L = 1 no draft token is ever tested: a pass says nothing of the verifier, so it is not exit 0.
TEST(VerifyCli, LengthOneIsVacuousUnlessAllowed) {
  auto r = run_cli("verify " + config() + " --length 1 --samples 2000" + out("one.h5"));
  EXPECT_EQ(r.status, 3) << r.output;
  EXPECT_THAT(r.output, HasSubstr("vacuous: the draft is not exercised"));
  EXPECT_THAT(r.output, HasSubstr("exit status 3 unless --allow-vacuous"));
  r = run_cli("verify " + config() + " --length 1 --samples 2000 --allow-vacuous --json" +
              out("one.h5"));
  EXPECT_EQ(r.status, 0) << r.output;
  EXPECT_THAT(r.output, HasSubstr("\"draft_exercised\": false, \"tested_positions\": 0"));
}

TEST(VerifyCli, ShowsProgressOnStderr) {
  // Not a terminal here, so the periodic lines of `speclab run` (experiments/progress.hpp).
  const auto r = run_cli("verify " + config() + " --length 2 --samples 60000" + out("p.h5"));
  EXPECT_EQ(r.status, 0) << r.output;
  EXPECT_THAT(r.output, HasSubstr("speclab: point 1/1"));
  EXPECT_THAT(r.output, HasSubstr("acceptance"));
  EXPECT_THAT(r.output, HasSubstr("speclab: 1 of 1 points in"));
}

TEST(VerifyCli, UnusableOutExitsTwoBeforeSampling) {
  const auto dir = std::filesystem::path(SPECLAB_BINARY_DIR) / "test-output" / "verify";
  std::filesystem::create_directories(dir);
  const auto file = dir / "a-file";
  { std::ofstream(file) << "keep me"; }
  // Several points write DIR/POINT.verify.h5: a file where DIR should be is bad input.
  auto r = run_cli("verify " + config() + " --set 'sweep.decode.gamma=[1,2]' --length 2 --out '" +
                   file.string() + "'");
  EXPECT_EQ(r.status, 2) << r.output;
  EXPECT_THAT(r.output, HasSubstr("cannot create the report directory"));
  EXPECT_EQ(std::filesystem::file_size(file), 7u);
  // One point into a place that takes no file.
  r = run_cli("verify " + config() + " --length 2 --out /proc/report.h5");
  EXPECT_EQ(r.status, 2) << r.output;
  EXPECT_THAT(r.output, HasSubstr("choose a writable path"));
  EXPECT_THAT(r.output, Not(HasSubstr("speclab: point")));  // refused before any sampling
}

TEST(VerifyCli, BadInputExitsTwo) {
  auto r = run_cli("verify " + config() + " --epsilon 1.5" + out("bad.h5"));
  EXPECT_EQ(r.status, 2);
  EXPECT_THAT(r.output, HasSubstr("--epsilon is 1.5"));
  r = run_cli("verify --config /nonexistent/config.toml");
  EXPECT_EQ(r.status, 2);
  EXPECT_THAT(r.output, HasSubstr("/nonexistent/config.toml"));
  r = run_cli("verify " + config() + " --length 4" + out("long.h5"));
  EXPECT_EQ(r.status, 2);
  EXPECT_THAT(r.output, HasSubstr("more than 4096 outcomes"));
}

}  // namespace
}  // namespace speclab
