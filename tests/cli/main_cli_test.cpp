// The `speclab` program itself (cli/main.cpp): --version names the version and the commit the
// binary was built from, a misspelt command is named with a suggestion, and `speclab models`
// (which `bench decode --help` points at) lists every registered model.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <regex>
#include <string>

#include "core/models/model_registry.hpp"
#include "tests/support/cli_run.hpp"

namespace speclab {
namespace {

using ::testing::HasSubstr;
using testing::run_cli;

TEST(MainCli, VersionPrintsVersionAndGitCommit) {
  const auto r = run_cli("--version");
  EXPECT_EQ(r.status, 0) << r.output;
  // Built from this checkout, so the commit is known (with -dirty for uncommitted changes).
  EXPECT_TRUE(std::regex_search(
      r.output, std::regex(R"(^speclab \d+\.\d+\.\d+ \(git [0-9a-f]{40}(-dirty)?\))")))
      << r.output;
}

TEST(MainCli, UnknownCommandIsNamedWithASuggestion) {
  const auto r = run_cli("rnu config.toml");
  EXPECT_EQ(r.status, 2) << r.output;
  EXPECT_THAT(r.output, HasSubstr("unknown command 'rnu' (did you mean \"run\"?)"));
  EXPECT_THAT(r.output, HasSubstr("verify-batch"));  // the commands are listed
  const auto far = run_cli("frobnicate");
  EXPECT_EQ(far.status, 2) << far.output;
  EXPECT_THAT(far.output, HasSubstr("unknown command 'frobnicate'"));
  EXPECT_THAT(far.output, ::testing::Not(HasSubstr("did you mean")));
}

TEST(MainCli, ModelsListsEveryRegisteredModel) {
  const auto r = run_cli("models");
  ASSERT_EQ(r.status, 0) << r.output;
  for (const std::string& name : model_names()) EXPECT_THAT(r.output, HasSubstr(name));
  EXPECT_THAT(r.output, HasSubstr("32000"));  // lsm-target's vocabulary
  const auto help = run_cli("bench decode --help");
  EXPECT_EQ(help.status, 0) << help.output;
  EXPECT_THAT(help.output, HasSubstr("`speclab models`"));
}

}  // namespace
}  // namespace speclab
