// `speclab bench decode --draft synthetic:RATE` (bench/bench_decode.cpp,
// core/models/synthetic_draft.hpp): the measured acceptance is the rate asked for, and a bad rate
// exits with status 2 naming it.
#include <gtest/gtest.h>

#include <regex>
#include <string>

#include "tests/support/cli_run.hpp"

namespace {

using speclab::testing::run_cli;

TEST(BenchSyntheticCli, MeasuresTheRateAskedFor) {
  // --seed 0 and the defaults (batch 1, 256 tokens): about 230 tested positions, so the measured
  // rate's standard deviation is about 0.026; 0.8 ± 0.04 is the documented tolerance of this
  // command. The statistical test (tests/stat/synthetic_draft_stat_test.cpp) checks it at 10^5.
  const auto run =
      run_cli("bench decode --target lsm-target --draft synthetic:0.8 --gamma 4 --json");
  ASSERT_EQ(run.status, 0) << run.output;
  std::smatch match;
  ASSERT_TRUE(std::regex_search(run.output, match, std::regex("\"alpha\": ([0-9.]+)")))
      << run.output;
  EXPECT_NEAR(std::stod(match[1]), 0.80, 0.04) << run.output;
  ASSERT_TRUE(std::regex_search(run.output, match, std::regex("\"alpha_sum_min\": ([0-9.]+)")))
      << run.output;
  EXPECT_NEAR(std::stod(match[1]), 0.80, 1e-4) << run.output;
}

TEST(BenchSyntheticCli, BadRateExitsTwo) {
  const auto run = run_cli("bench decode --target lsm-target --draft synthetic:1.2 --gamma 4");
  EXPECT_EQ(run.status, 2) << run.output;
  EXPECT_NE(run.output.find("synthetic:1.2"), std::string::npos) << run.output;
}

}  // namespace
