// `speclab exact` (cli/cmd_exact.cpp): the exact step distribution of docs/verifiers.md V1-V8 as
// JSON with each draft position's price of reproducibility, and exit status 2 with a message naming
// the option for bad input (docs/architecture.md "Errors").
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <array>
#include <cstdio>
#include <string>

#include "tests/support/cli_run.hpp"

namespace {

using speclab::testing::CliRun;

// Arguments are fixed strings written in this file, so no shell quoting is needed.
CliRun run_exact(const std::string& arguments) {
  return speclab::testing::run_cli("exact " + arguments);
}

bool contains(const std::string& text, const std::string& needle) {
  return text.find(needle) != std::string::npos;
}

TEST(ExactCli, SpecTestVectorIsLosslessWithTenNinthsAccepted) {
  // docs/verifiers.md test vector (V5): β = 2/3 per position, E[accepted] = 2/3 + 4/9 = 10/9.
  const CliRun run = run_exact("--target 1/3,2/3 --draft 2/3,1/3 --gamma 2 --method token");
  ASSERT_EQ(run.status, 0) << run.output;
  EXPECT_TRUE(contains(run.output, "\"expected_accepted\": \"10/9\"")) << run.output;
  EXPECT_TRUE(contains(run.output, "\"expected_emitted\": \"19/9\"")) << run.output;
  EXPECT_TRUE(contains(run.output, "\"lossless\": true")) << run.output;
  EXPECT_TRUE(contains(run.output, "\"lossy\": false")) << run.output;
  // A rejection at position 1 (probability 1/3) always emits token 1, the residual's only token.
  EXPECT_TRUE(contains(run.output, "\"1\": \"1/3\"")) << run.output;
  EXPECT_TRUE(contains(run.output,
                       "\"first_token_marginal\": {\n    \"0\": \"1/3\",\n    \"1\": "
                       "\"2/3\"\n  }"))
      << run.output;
}

TEST(ExactCli, DecimalsAreReadExactly) {
  const CliRun run = run_exact("--target 0.25,0.75 --draft 0.25,0.75 --gamma 1 --method token");
  ASSERT_EQ(run.status, 0) << run.output;
  EXPECT_TRUE(contains(run.output, "\"expected_accepted\": \"1/1\"")) << run.output;
}

TEST(ExactCli, LenientBelowOneIsReportedLossy) {
  // l = 3/4 on the test vector: first-token marginal (4/9, 5/9) ≠ (1/3, 2/3).
  const CliRun run =
      run_exact("--target 1/3,2/3 --draft 2/3,1/3 --gamma 2 --method lenient --leniency 3/4");
  ASSERT_EQ(run.status, 0) << run.output;
  EXPECT_TRUE(contains(run.output, "\"lossy\": true")) << run.output;
  EXPECT_TRUE(contains(run.output, "\"lossless\": false")) << run.output;
  EXPECT_TRUE(contains(run.output, "\"0\": \"4/9\"")) << run.output;
}

TEST(ExactCli, GreedyIsLosslessAgainstArgmax) {
  const CliRun run = run_exact("--target 1/3,2/3 --draft 2/3,1/3 --gamma 2 --method greedy");
  ASSERT_EQ(run.status, 0) << run.output;
  EXPECT_TRUE(contains(run.output, "\"lossless_reference\": \"argmax(target)\"")) << run.output;
  EXPECT_TRUE(contains(run.output, "\"lossless\": true")) << run.output;
}

TEST(ExactCli, BlockAcceptsElevenNinthsOnTheSpecVector) {
  // docs/verifiers.md V5: 11/9 under block verification where V1 gets 10/9 (derivation in
  // tests/property/exact_test.cpp, Exact.BlockSpecTestVectorAcceptsElevenNinths).
  const CliRun run = run_exact("--target 1/3,2/3 --draft 2/3,1/3 --gamma 2 --method block");
  ASSERT_EQ(run.status, 0) << run.output;
  EXPECT_TRUE(contains(run.output, "\"method\": \"block\"")) << run.output;
  EXPECT_TRUE(contains(run.output, "\"expected_accepted\": \"11/9\"")) << run.output;
  EXPECT_TRUE(contains(run.output, "\"conditionals_hold\": true")) << run.output;
  EXPECT_TRUE(contains(run.output, "\"lossless\": true")) << run.output;
  EXPECT_TRUE(contains(run.output, "\"lossy\": false")) << run.output;
}

TEST(ExactCli, TreeMethodsReportLosslessness) {
  struct Case {
    const char* method;
    const char* expected_accepted;
    bool lossless;
  };
  // K = 2 over V = 2: without replacement and top-2 always accept (E = γ); i.i.d. gives 112/81
  // (ExactTree.SpecVectorValues); the softmax-q variant accepts everything and is not lossless.
  const Case cases[] = {{"tree-iid", "112/81", true},
                        {"tree-swor", "2/1", true},
                        {"tree-topk", "2/1", true},
                        {"tree-topk-softmax-q", "2/1", false},
                        {"traversal", "2/1", true}};
  for (const Case& c : cases) {
    const CliRun run =
        run_exact(std::string("--target 1/3,2/3 --draft 2/3,1/3 --gamma 2 --method ") + c.method +
                  " --branches 2");
    ASSERT_EQ(run.status, 0) << c.method << "\n" << run.output;
    EXPECT_TRUE(contains(run.output, "\"branches\": 2")) << run.output;
    EXPECT_TRUE(
        contains(run.output, std::string("\"expected_accepted\": \"") + c.expected_accepted + "\""))
        << c.method << "\n"
        << run.output;
    EXPECT_TRUE(
        contains(run.output, std::string("\"lossless\": ") + (c.lossless ? "true" : "false")))
        << c.method << "\n"
        << run.output;
    EXPECT_TRUE(contains(run.output, std::string("\"lossy\": ") + (c.lossless ? "false" : "true")))
        << c.method << "\n"
        << run.output;
  }
}

TEST(ExactCli, KseqPrintsRhoAndIsLossless) {
  const CliRun run =
      run_exact("--target 1/3,2/3 --draft 2/3,1/3 --gamma 1 --method kseq --branches 2");
  ASSERT_EQ(run.status, 0) << run.output;
  EXPECT_TRUE(contains(run.output, "\"rho\": \"1.43425854591")) << run.output;  // (5+√13)/6
  EXPECT_TRUE(contains(run.output, "\"lossless\": true")) << run.output;
  EXPECT_TRUE(contains(run.output, "\"conditionals_hold\": true")) << run.output;
}

TEST(ExactCli, TraversalWithOneBranchIsBlockOnTheSpecVector) {
  // One child per node: traversal is V5 and accepts 11/9 (proofs/v5_block.md §4).
  const CliRun run =
      run_exact("--target 1/3,2/3 --draft 2/3,1/3 --gamma 2 --method traversal --branches 1");
  ASSERT_EQ(run.status, 0) << run.output;
  EXPECT_TRUE(contains(run.output, "\"method\": \"traversal\"")) << run.output;
  EXPECT_TRUE(contains(run.output, "\"expected_accepted\": \"11/9\"")) << run.output;
  EXPECT_TRUE(contains(run.output, "\"conditionals_hold\": true")) << run.output;
  EXPECT_TRUE(contains(run.output, "\"lossless\": true")) << run.output;
}

TEST(ExactCli, TypicalIsLossyOnTheSpecVector) {
  // Both tokens pass the threshold ε = 0.09, so the first token follows q = (2/3, 1/3).
  const CliRun run = run_exact("--target 1/3,2/3 --draft 2/3,1/3 --gamma 2 --method typical");
  ASSERT_EQ(run.status, 0) << run.output;
  EXPECT_TRUE(contains(run.output, "\"lossy\": true")) << run.output;
  EXPECT_TRUE(contains(run.output, "\"lossless\": false")) << run.output;
  EXPECT_TRUE(contains(run.output, "\"expected_accepted\": \"2/1\"")) << run.output;
  EXPECT_TRUE(contains(run.output, "\"0\": \"2/3\"")) << run.output;
}

// The price of reproducibility on the test vector q = (2/3, 1/3), p = (1/3, 2/3), derived by
// hand: V1 accepts Σ min(p, q) = 1/3 + 1/3 = 2/3; TV = 1/3, so coupled's bound is
// (1 − 1/3)/(1 + 1/3) = 1/2; coupled's agreement is Σ_v 1/Σ_u max(p_u/p_v, q_u/q_v) with
// Σ_u = 1 + max(2, 1/2) = 3 for either v, so 1/3 + 1/3 = 2/3; sampled-match Σ p·q = 2/9 + 2/9 =
// 4/9. Each of the γ draft positions lists them.
constexpr const char* kPriceAtPosition =
    "\"position\": {},\n      \"token\": \"2/3\",\n      \"coupled\": \"2/3\",\n"
    "      \"coupled_bound\": \"1/2\",\n      \"sampled-match\": \"4/9\"";

std::string price_at(int position) {
  std::string text = kPriceAtPosition;
  text.replace(text.find("{}"), 2, std::to_string(position));
  return text;
}

TEST(ExactCli, EveryMethodPrintsThePriceOfReproducibilityPerPosition) {
  for (const char* method : {"token", "coupled", "sampled-match", "block"}) {
    const CliRun run =
        run_exact(std::string("--target 1/3,2/3 --draft 2/3,1/3 --gamma 2 --method ") + method);
    ASSERT_EQ(run.status, 0) << method << "\n" << run.output;
    EXPECT_TRUE(contains(run.output, "\"price_of_reproducibility\": [")) << run.output;
    EXPECT_TRUE(contains(run.output, price_at(1))) << method << "\n" << run.output;
    EXPECT_TRUE(contains(run.output, price_at(2))) << method << "\n" << run.output;
    EXPECT_FALSE(contains(run.output, "\"position\": 3")) << method << "\n" << run.output;
  }
  // No draft position, nothing to price.
  const CliRun none = run_exact("--target 1/3,2/3 --draft 2/3,1/3 --gamma 0 --method coupled");
  ASSERT_EQ(none.status, 0) << none.output;
  EXPECT_TRUE(contains(none.output, "\"price_of_reproducibility\": []")) << none.output;
  // q = p: V1 and coupled accept every draft (and the bound is 1); sampled-match accepts
  // Σ p² = 1/16 + 9/16 = 5/8.
  const CliRun same = run_exact("--target 1/4,3/4 --draft 1/4,3/4 --gamma 1 --method token");
  ASSERT_EQ(same.status, 0) << same.output;
  EXPECT_TRUE(contains(same.output,
                       "\"position\": 1,\n      \"token\": \"1/1\",\n      \"coupled\": "
                       "\"1/1\",\n      \"coupled_bound\": \"1/1\",\n      \"sampled-match\": "
                       "\"5/8\""))
      << same.output;
}

TEST(ExactCli, MatchVerifiersAreLosslessWithTheirClosedFormAcceptance) {
  // Independent noise at each position: E[accepted] = a + a² with a = 2/3 (coupled: 10/9, as V1
  // on this vector) and a = 4/9 (sampled-match: 4/9 + 16/81 = 52/81).
  struct Case {
    const char* method;
    const char* expected_accepted;
    const char* marginal;
  };
  const Case cases[] = {{"coupled", "10/9", "\"2/3\",\n    \"4/9\""},
                        {"sampled-match", "52/81", "\"4/9\",\n    \"16/81\""}};
  for (const Case& c : cases) {
    const CliRun run =
        run_exact(std::string("--target 1/3,2/3 --draft 2/3,1/3 --gamma 2 --method ") + c.method);
    ASSERT_EQ(run.status, 0) << c.method << "\n" << run.output;
    EXPECT_TRUE(contains(run.output, std::string("\"method\": \"") + c.method + "\""))
        << run.output;
    EXPECT_TRUE(
        contains(run.output, std::string("\"expected_accepted\": \"") + c.expected_accepted + "\""))
        << c.method << "\n"
        << run.output;
    EXPECT_TRUE(
        contains(run.output, std::string("\"position_acceptance_marginal\": [\n    ") + c.marginal))
        << c.method << "\n"
        << run.output;
    EXPECT_TRUE(contains(run.output, "\"lossless\": true")) << run.output;
    EXPECT_TRUE(contains(run.output, "\"conditionals_hold\": true")) << run.output;
    EXPECT_TRUE(contains(run.output, "\"lossy\": false")) << run.output;
    EXPECT_TRUE(contains(run.output, "\"lossless_reference\": \"target\"")) << run.output;
  }
}

TEST(ExactCli, BadInputExitsTwoNamingTheOption) {
  struct Case {
    const char* arguments;
    const char* needle;
  };
  const Case cases[] = {
      {"--target 1/3,1/3 --draft 2/3,1/3 --gamma 2 --method token", "--target"},
      {"--target abc --draft 2/3,1/3 --gamma 2 --method token", "--target"},
      {"--target 1/3,2/3 --draft 2/3,1/3 --gamma -1 --method token", "--gamma"},
      {"--target 1/3,2/3 --draft 2/3,1/3 --gamma 9 --method token", "--gamma"},
      {"--target 1/3,2/3 --draft 1/0,1/3 --gamma 2 --method token", "--draft"},
      {"--target 1/3,2/3 --draft -1/3,4/3 --gamma 2 --method token", "--draft"},
      {"--target 1/3,2/3 --draft 1/3,1/3,1/3 --gamma 2 --method token", "--draft"},
      {"--target 1/3,2/3 --draft 2/3,1/3 --gamma 2 --method medusa", "--method"},
      {"--target 1/3,2/3 --draft 2/3,1/3 --gamma 2 --method tree-iid", "--branches K"},
      {"--target 1/3,2/3 --draft 2/3,1/3 --gamma 2 --method token --branches 2", "--branches"},
      {"--target 1/3,2/3 --draft 2/3,1/3 --gamma 2 --method kseq --branches 0", "--branches"},
      {"--target 1/3,2/3 --draft 2/3,1/3 --gamma 2 --method kseq --branches two", "--branches"},
      {"--target 1/3,2/3 --draft 2/3,1/3 --gamma 2 --method tree-swor --branches 3", "--branches"},
      {"--target 1/3,2/3 --draft 1,0 --gamma 2 --method tree-swor --branches 2", "support"},
      {"--target 1/3,2/3 --draft 2/3,1/3 --gamma 2 --method tree-topk --branches 3", "vocabulary"},
      {"--target 1/3,2/3 --draft 1,0 --gamma 2 --method traversal --branches 2", "support"},
      {"--target 1/8,1/8,1/8,1/8,1/8,1/8,1/8,1/8 --draft 1/8,1/8,1/8,1/8,1/8,1/8,1/8,1/8 "
       "--gamma 4 --method traversal --branches 4",
       "enumerates about"},
      {"--target 1/3,2/3 --draft 2/3,1/3 --gamma 2 --method typical --epsilon 0", "--epsilon"},
      {"--target 1/3,2/3 --draft 2/3,1/3 --gamma 2 --method typical --delta -1", "--delta"},
      {"--target 1/3,2/3 --draft 2/3,1/3 --gamma 2 --method block --epsilon 0.1", "--epsilon"},
      {"--target 1/3,2/3 --draft 2/3,1/3 --gamma 2 --method lenient --leniency 0", "--leniency"},
      {"--target 1/3,2/3 --draft 2/3,1/3 --gamma 2 --method lenient --leniency 5/4", "--leniency"},
      {"--target 1/3,2/3 --draft 2/3,1/3 --gamma 2 --method token --leniency 1/2", "--leniency"},
      {"--target 1/3,2/3 --draft 2/3,1/3 --gamma 2 --method coupled --leniency 1/2", "--leniency"},
      {"--target 1/3,2/3 --draft 2/3,1/3 --gamma 2 --method sampled-match --branches 2",
       "--branches"},
      {"--target 1/3,2/3 --draft 2/3,1/3 --gamma 2 --method coupld", "did you mean"},
  };
  for (const Case& c : cases) {
    const CliRun run = run_exact(c.arguments);
    EXPECT_EQ(run.status, 2) << c.arguments << "\n" << run.output;
    EXPECT_TRUE(contains(run.output, c.needle)) << c.arguments << "\n" << run.output;
  }
}

}  // namespace
