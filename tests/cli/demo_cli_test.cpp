// The `speclab demo` and `speclab bench verify` commands, run as a user runs them.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <string>

#include "core/io/hdf5_file.hpp"
#include "tests/support/cli_run.hpp"

namespace speclab {
namespace {

using ::testing::HasSubstr;

using testing::CliRun;
using testing::run_cli;

std::filesystem::path fresh_dir(const std::string& name) {
  const auto dir = std::filesystem::path(SPECLAB_BINARY_DIR) / "test-output" / name;
  std::filesystem::remove_all(dir);
  return dir;
}

TEST(DemoCli, WritesResultsAndPrintsClosedForm) {
  const auto dir = fresh_dir("demo");
  const CliRun r =
      run_cli("demo --out " + dir.string() + " --batch 32 --gamma 3 --vocab 256 --steps 4");
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_THAT(r.output, HasSubstr("closed form"));
  EXPECT_THAT(r.output, HasSubstr("fast path vs reference: identical tokens on every step"));
  const Hdf5Reader file(dir / "demo.h5");
  EXPECT_EQ(file.read_string_attribute("schema"), "speclab.demo");
  const auto n_accepted = file.read<int32_t>("n_accepted", 1);
  ASSERT_EQ(n_accepted.shape, (std::vector<int64_t>{128}));
  const auto emitted = file.read<int32_t>("emitted_tokens", 2);
  ASSERT_EQ(emitted.shape, (std::vector<int64_t>{128, 4}));
  // Every row is its accepted prefix plus one token, then -1 padding.
  for (int64_t row = 0; row < 128; ++row) {
    for (int64_t i = 0; i < 4; ++i) {
      const int32_t t = emitted.values[row * 4 + i];
      EXPECT_EQ(t >= 0, i <= n_accepted.values[row]) << "row " << row << " position " << i;
      EXPECT_LT(t, 256);
    }
  }
  EXPECT_FALSE(std::filesystem::exists(dir / "demo.h5.partial"));
}

TEST(DemoCli, BadOptionExitsTwoAndWritesNothing) {
  const auto dir = fresh_dir("demo-bad");
  const CliRun r = run_cli("demo --out " + dir.string() + " --batch 0");
  EXPECT_EQ(r.status, 2);
  EXPECT_THAT(r.output, HasSubstr("--batch ≥ 1"));
  EXPECT_FALSE(std::filesystem::exists(dir / "demo.h5"));
}

TEST(DemoCli, OutNamingAFileExitsTwoAndKeepsTheFile) {
  const auto dir = fresh_dir("demo-file");
  std::filesystem::create_directories(dir);
  const auto file = dir / "not-a-directory";
  std::FILE* f = std::fopen(file.c_str(), "w");
  std::fputs("keep me", f);
  std::fclose(f);
  const CliRun r = run_cli("demo --out '" + file.string() + "' --batch 4 --vocab 16 --steps 1");
  EXPECT_EQ(r.status, 2) << r.output;
  EXPECT_THAT(r.output, HasSubstr("cannot create the results directory"));
  EXPECT_EQ(std::filesystem::file_size(file), 7u);
}

TEST(BenchCli, JsonReportsTimeBesideFloorAndPeer) {
  const CliRun r = run_cli("bench verify --batch 2 --gamma 2 --vocab 2000 --repeats 1 --json");
  ASSERT_EQ(r.status, 0) << r.output;
  for (const char* key : {"\"seconds_per_batch\"", "\"floor_seconds\"", "\"read_gbps\"",
                          "\"verified_tokens_per_s\"", "\"peer_seconds_per_batch\""}) {
    EXPECT_THAT(r.output, HasSubstr(key));
  }
}

// Every figure carries its machine, and speclab's idle OpenMP threads wait passively (cli/main.cpp
// restarts the executable with OMP_WAIT_POLICY=passive) unless the user chose otherwise.
TEST(BenchCli, JsonCarriesTheMachineAndThePassiveWaitPolicy) {
  ::unsetenv("OMP_WAIT_POLICY");
  ::unsetenv("GOMP_SPINCOUNT");
  const CliRun r =
      run_cli("bench verify --batch 2 --gamma 2 --vocab 2000 --repeats 1 --contend 1 --json");
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_THAT(r.output, HasSubstr("\"omp_wait_policy\": \"passive\""));
  EXPECT_THAT(r.output, HasSubstr("\"contending_processes\": 1"));
  EXPECT_THAT(r.output,
              ::testing::ContainsRegex("\"build_isa\": \"(avx512-vnni|avx512|avx2|x86-64)\""));
  EXPECT_THAT(r.output, HasSubstr("\"cpu\": \""));
  EXPECT_THAT(r.output, ::testing::ContainsRegex("\"threads\": [1-9]"));

  ::setenv("OMP_WAIT_POLICY", "active", 1);
  const CliRun told = run_cli("bench verify --batch 2 --gamma 2 --vocab 2000 --repeats 1 --json");
  ::unsetenv("OMP_WAIT_POLICY");
  ASSERT_EQ(told.status, 0) << told.output;
  EXPECT_THAT(told.output, HasSubstr("\"omp_wait_policy\": \"active\""));
}

TEST(BenchCli, DecodeJsonHasARowPerGamma) {
  const CliRun r = run_cli(
      "bench decode --target lsm-tiny-target --draft lsm-tiny-draft --tokens 24 --gamma 1,3 "
      "--json");
  ASSERT_EQ(r.status, 0) << r.output;
  for (const char* key : {"\"rows\"", "\"gamma\": 1", "\"gamma\": 3", "\"alpha\"",
                          "\"alpha_sum_min\"", "\"emitted_per_step\"", "\"emitted_formula\"",
                          "\"speedup\"", "\"speedup_predicted\"", "\"c\""}) {
    EXPECT_THAT(r.output, HasSubstr(key));
  }
}

TEST(BenchCli, DecodeRejectsUnknownModelListingKnownOnes) {
  const CliRun r = run_cli("bench decode --target no-such-model --tokens 8");
  EXPECT_EQ(r.status, 2);
  EXPECT_THAT(r.output, HasSubstr("unknown model \"no-such-model\"; known models: lsm-target"));
  EXPECT_THAT(r.output, HasSubstr("ngram-5"));
  const CliRun v = run_cli("bench decode --target lsm-tiny-target --draft ngram-2 --tokens 8");
  EXPECT_EQ(v.status, 2);
  EXPECT_THAT(v.output, HasSubstr("has vocabulary size 256 but target lsm-tiny-target has 16"));
}

TEST(BenchCli, BadSizeExitsTwo) {
  const CliRun r = run_cli("bench verify --gamma 0");
  EXPECT_EQ(r.status, 2);
  EXPECT_THAT(r.output, HasSubstr("--gamma ≥ 1"));
  const CliRun c = run_cli("bench verify --contend -1");
  EXPECT_EQ(c.status, 2);
  EXPECT_THAT(c.output, HasSubstr("--contend ≥ 0"));
}

}  // namespace
}  // namespace speclab
