// The `speclab` program itself (cli/main.cpp): --version names the version and the commit the
// binary was built from, a misspelt command is named with a suggestion, and `speclab models`
// (which `bench decode --help` points at) lists every registered model. The data files speclab
// ships (the n-gram corpus) are found from any working directory.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <regex>
#include <string>

#include "core/base/source_tree.hpp"
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

// The data files are found under the source tree by an absolute path, not one relative to the
// working directory: a build through ccache with a base directory once made the path relative
// ("../../data/models"), so runs found the files only from a directory two levels down.
TEST(MainCli, DataFilesAreFoundFromAnyWorkingDirectory) {
  EXPECT_TRUE(source_tree_path("data/models").is_absolute());
  EXPECT_TRUE(std::filesystem::exists(source_tree_path("data/corpus/english.txt")));
  const std::filesystem::path elsewhere =
      std::filesystem::temp_directory_path() /
      ("speclab_cwd_" + std::to_string(::testing::UnitTest::GetInstance()->random_seed()));
  std::filesystem::create_directories(elsewhere / "a/b/c");
  // The n-gram models read data/corpus/english.txt.
  for (const auto& dir : {std::filesystem::path("/"), elsewhere / "a/b/c"}) {
    const auto r = run_cli("bench decode --target ngram-3 --draft ngram-2 --tokens 8", false, dir);
    EXPECT_EQ(r.status, 0) << "from " << dir << ":\n" << r.output;
  }
  std::filesystem::remove_all(elsewhere);
}

}  // namespace
}  // namespace speclab
