// `speclab exact --method lp-optimal` (cli/cmd_exact.cpp, core/exact/lp_optimal.hpp): the
// multi-draft optimum as expected_accepted, each lossless i.i.d. verifier's gap to it at γ = 1,
// and exit status 2 naming the option for a bound asked outside its limits.
#include <gtest/gtest.h>

#include <string>

#include "tests/support/cli_run.hpp"

namespace {

using speclab::testing::CliRun;

CliRun run_exact(const std::string& arguments) {
  return speclab::testing::run_cli("exact " + arguments);
}

bool contains(const std::string& text, const std::string& needle) {
  return text.find(needle) != std::string::npos;
}

constexpr const char* kRows = "--target 1/3,2/3 --draft 2/3,1/3 --gamma 1 ";

TEST(ExactLpCli, OneDraftIsSumMin) {
  // Σ min(p, q) = 1/3 + 1/3.
  const CliRun run = run_exact(std::string(kRows) + "--method lp-optimal --branches 1");
  ASSERT_EQ(run.status, 0) << run.output;
  EXPECT_TRUE(contains(run.output, "\"method\": \"lp-optimal\"")) << run.output;
  EXPECT_TRUE(contains(run.output, "\"expected_accepted\": \"2/3\"")) << run.output;
}

TEST(ExactLpCli, TwoDraftsAndTheGapOfRecursiveRejection) {
  // The cut bound min_H p(H) + 1 − q(H)²: H = ∅ → 1, {0} → 1/3 + 1 − 4/9 = 8/9, {1} → 14/9,
  // {0, 1} → 1; so 8/9. Recursive rejection with two i.i.d. candidates accepts the first with
  // Σ min(p, q) = 2/3; after a rejection (1/3, only ever of x = 0) the residual is (0, 1) and the
  // second candidate is token 1 with probability 1/3, accepted: 2/3 + 1/9 = 7/9, 1/9 short.
  const CliRun bound = run_exact(std::string(kRows) + "--method lp-optimal --branches 2");
  ASSERT_EQ(bound.status, 0) << bound.output;
  EXPECT_TRUE(contains(bound.output, "\"expected_accepted\": \"8/9\"")) << bound.output;
  const CliRun iid = run_exact(std::string(kRows) + "--method tree-iid --branches 2");
  ASSERT_EQ(iid.status, 0) << iid.output;
  EXPECT_TRUE(contains(iid.output, "\"expected_accepted\": \"7/9\"")) << iid.output;
  EXPECT_TRUE(contains(iid.output, "\"lp_optimal\": \"8/9\"")) << iid.output;
  EXPECT_TRUE(contains(iid.output, "\"gap_to_lp_optimal\": \"1/9\"")) << iid.output;
}

TEST(ExactLpCli, TokenVerificationHasNoGapAndGapsAreOnlyWhereTheyApply) {
  const CliRun token = run_exact(std::string(kRows) + "--method token");
  ASSERT_EQ(token.status, 0) << token.output;
  EXPECT_TRUE(contains(token.output, "\"gap_to_lp_optimal\": \"0/1\"")) << token.output;
  // Not at γ = 2, not for a lossy method, not for candidates drawn without replacement.
  for (const char* arguments :
       {"--target 1/3,2/3 --draft 2/3,1/3 --gamma 2 --method token",
        "--target 1/3,2/3 --draft 2/3,1/3 --gamma 1 --method typical",
        "--target 1/3,2/3 --draft 2/3,1/3 --gamma 1 --method tree-swor --branches 2"}) {
    const CliRun run = run_exact(arguments);
    ASSERT_EQ(run.status, 0) << arguments << "\n" << run.output;
    EXPECT_FALSE(contains(run.output, "lp_optimal")) << arguments << "\n" << run.output;
  }
}

TEST(ExactLpCli, OutsideItsLimitsExitsTwoNamingTheOption) {
  struct Case {
    const char* arguments;
    const char* needle;
  };
  const Case cases[] = {
      {"--target 1/3,2/3 --draft 2/3,1/3 --gamma 2 --method lp-optimal --branches 2", "--gamma 1"},
      {"--target 1/3,2/3 --draft 2/3,1/3 --gamma 1 --method lp-optimal", "--branches K"},
      {"--target 1/3,2/3 --draft 2/3,1/3 --gamma 1 --method lp-optimal --branches 5", "--branches"},
      {"--target 1/3,2/3 --draft 2/3,1/3 --gamma 1 --method lp-optimal --branches 0", "--branches"},
      {"--target 1/9,1/9,1/9,1/9,1/9,1/9,1/9,1/9,1/9 --draft 1/9,1/9,1/9,1/9,1/9,1/9,1/9,1/9,1/9 "
       "--gamma 1 --method lp-optimal --branches 2",
       "V ≤ 8"},
      {"--target 1/3,2/3 --draft 2/3,1/3 --gamma 1 --method lp-optimal --branches 2 --leniency 1",
       "--leniency"},
  };
  for (const Case& c : cases) {
    const CliRun run = run_exact(c.arguments);
    EXPECT_EQ(run.status, 2) << c.arguments << "\n" << run.output;
    EXPECT_TRUE(contains(run.output, c.needle)) << c.arguments << "\n" << run.output;
  }
}

}  // namespace
