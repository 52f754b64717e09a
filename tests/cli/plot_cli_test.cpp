// `speclab plot RESULTS_DIR -o FIGDIR`, run as a user runs it: the figures of a fresh run, with
// --json every figure not drawn named with why, and exit 2, never a Python traceback, for a
// missing directory, one without runs, a truncated result file or summary, or -o naming a file.
// Skips where /usr/bin/python3 or its matplotlib is missing (the command needs them;
// scripts/install-deps.sh installs them).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include "tests/support/cli_run.hpp"

namespace speclab {
namespace {

using testing::CliRun;
using ::testing::HasSubstr;
using ::testing::Not;
using testing::run_cli;

namespace fs = std::filesystem;

fs::path fresh_dir(const std::string& name) {
  const auto dir = fs::path(SPECLAB_BINARY_DIR) / "test-output" / name;
  fs::remove_all(dir);
  return dir;
}

bool have_matplotlib() {
  return std::system("/usr/bin/python3 -c 'import matplotlib, h5py, pandas' >/dev/null 2>&1") == 0;
}

TEST(PlotCli, MissingResultsDirectoryExitsTwo) {
  const auto dir = fresh_dir("plot-missing");
  const CliRun r = run_cli("plot '" + (dir / "nope").string() + "' -o '" + dir.string() + "'");
  EXPECT_EQ(r.status, 2) << r.output;
  EXPECT_THAT(r.output, HasSubstr("does not exist"));
}

TEST(PlotCli, DirectoryWithoutRunsExitsTwo) {
  if (!have_matplotlib()) GTEST_SKIP() << "/usr/bin/python3 with matplotlib not available";
  const auto dir = fresh_dir("plot-empty");
  fs::create_directories(dir / "results");
  const CliRun r =
      run_cli("plot '" + (dir / "results").string() + "' -o '" + (dir / "figs").string() + "'");
  EXPECT_EQ(r.status, 2) << r.output;
  EXPECT_THAT(r.output, HasSubstr("holds no runs"));
}

// A small run of the quickstart sweep into DIR/results.
void run_quickstart(const fs::path& dir) {
  const std::string config =
      std::string(SPECLAB_SOURCE_DIR) + "/experiments/configs/quickstart.toml";
  const CliRun run =
      run_cli("run '" + config +
              "' --set target.model=lsm-tiny-target --set draft.model=lsm-tiny-draft "
              "--set 'sweep.decode.gamma=[1,3]' --out '" +
              (dir / "results").string() + "'");
  ASSERT_EQ(run.status, 0) << run.output;
}

TEST(PlotCli, OutNamingAFileExitsTwo) {
  if (!have_matplotlib()) GTEST_SKIP() << "/usr/bin/python3 with matplotlib not available";
  const auto dir = fresh_dir("plot-out-file");
  run_quickstart(dir);
  { std::ofstream(dir / "figs") << "keep me"; }
  const CliRun r =
      run_cli("plot '" + (dir / "results").string() + "' -o '" + (dir / "figs").string() + "'");
  EXPECT_EQ(r.status, 2) << r.output;
  EXPECT_THAT(r.output, HasSubstr("-o " + (dir / "figs").string() + " is a file"));
  EXPECT_THAT(r.output, Not(HasSubstr("Traceback")));
  EXPECT_EQ(fs::file_size(dir / "figs"), 7u);
}

TEST(PlotCli, TruncatedResultFileExitsTwoNamingIt) {
  if (!have_matplotlib()) GTEST_SKIP() << "/usr/bin/python3 with matplotlib not available";
  const auto dir = fresh_dir("plot-truncated");
  run_quickstart(dir);
  fs::path victim;
  for (const auto& e : fs::directory_iterator(dir / "results")) {
    if (e.path().extension() == ".h5") victim = e.path();
  }
  ASSERT_FALSE(victim.empty());
  fs::resize_file(victim, 2000);  // as a copy cut short leaves it
  const CliRun r =
      run_cli("plot '" + (dir / "results").string() + "' -o '" + (dir / "figs").string() + "'");
  EXPECT_EQ(r.status, 2) << r.output;
  EXPECT_THAT(r.output, HasSubstr(victim.string() + ": cannot be read as a speclab result"));
  EXPECT_THAT(r.output, Not(HasSubstr("Traceback")));
}

TEST(PlotCli, TruncatedSummaryExitsTwoNamingIt) {
  if (!have_matplotlib()) GTEST_SKIP() << "/usr/bin/python3 with matplotlib not available";
  const auto dir = fresh_dir("plot-truncated-summary");
  run_quickstart(dir);
  const fs::path summary = dir / "results" / "summary.csv";
  ASSERT_TRUE(fs::exists(summary));
  fs::resize_file(summary, 20);  // "id,index,name,..." and no `file` column
  for (const char* json : {"", " --json"}) {
    const CliRun r = run_cli("plot '" + (dir / "results").string() + "' -o '" +
                             (dir / "figs").string() + "'" + json);
    EXPECT_EQ(r.status, 2) << r.output;
    EXPECT_THAT(r.output, HasSubstr(summary.string() + ": no 'file' column")) << r.output;
    EXPECT_THAT(r.output, HasSubstr("expected a summary written by `speclab run`"));
    EXPECT_THAT(r.output, Not(HasSubstr("Traceback")));
  }
}

TEST(PlotCli, RendersTheStandardFiguresOfARun) {
  if (!have_matplotlib()) GTEST_SKIP() << "/usr/bin/python3 with matplotlib not available";
  const auto dir = fresh_dir("plot-run");
  run_quickstart(dir);
  const CliRun r =
      run_cli("plot '" + (dir / "results").string() + "' -o '" + (dir / "figs").string() + "'");
  ASSERT_EQ(r.status, 0) << r.output;
  for (const char* name : {"quickstart_position_acceptance.png", "quickstart_accepted_length.png",
                           "quickstart_emitted_vs_gamma.png", "quickstart_speedup_vs_batch.png",
                           "quickstart_speedup_vs_gamma.png"}) {
    const fs::path png = dir / "figs" / name;
    ASSERT_TRUE(fs::exists(png)) << png << "\n" << r.output;
    EXPECT_GT(fs::file_size(png), 10000u) << png;
  }
}

// --json: the figures written, and every figure considered and not drawn with its reason (the
// quickstart sweep varies batch size and γ over one temperature and one verifier, with a
// baseline, and there is no `speclab verify` report).
TEST(PlotCli, JsonNamesEveryFigureNotDrawnWithWhy) {
  if (!have_matplotlib()) GTEST_SKIP() << "/usr/bin/python3 with matplotlib not available";
  const auto dir = fresh_dir("plot-json");
  run_quickstart(dir);
  const CliRun r = run_cli(
      "plot '" + (dir / "results").string() + "' -o '" + (dir / "figs").string() + "' --json",
      /*stdout_only=*/true);
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_THAT(r.output, HasSubstr((dir / "figs" / "quickstart_speedup_vs_gamma.png").string()));
  EXPECT_THAT(r.output, HasSubstr("\"not_drawn\": [\"quickstart_method_comparison: one verifier "
                                  "method in the sweep (sweep verifier.method)\""));
  EXPECT_THAT(r.output, HasSubstr("\"quickstart_alpha_vs_temperature: one temperature in the "
                                  "sweep (sweep sampling.temperature)\""));
  EXPECT_THAT(r.output, HasSubstr("\"verification: no `speclab verify` report in "));
}

// A sweep whose axes give no figure (plain decoding only, one point) is not "0 figures, exit 0":
// each figure is named with the reason it cannot be drawn, and the status is 3.
TEST(PlotCli, SweepWithNoDrawableFigureSaysWhyAndExitsThree) {
  if (!have_matplotlib()) GTEST_SKIP() << "/usr/bin/python3 with matplotlib not available";
  const auto dir = fresh_dir("plot-plain");
  fs::create_directories(dir);
  std::ofstream(dir / "plain.toml") << "name = \"plain\"\n[target]\nmodel = \"lsm-tiny-target\"\n"
                                       "[decode]\nsequences = 2\nmax_new_tokens = 4\n";
  const CliRun run = run_cli("run '" + (dir / "plain.toml").string() + "' --out '" +
                             (dir / "results").string() + "'");
  ASSERT_EQ(run.status, 0) << run.output;
  const CliRun r =
      run_cli("plot '" + (dir / "results").string() + "' -o '" + (dir / "figs").string() + "'");
  EXPECT_EQ(r.status, 3) << r.output;
  EXPECT_THAT(r.output, HasSubstr("not drawn: plain_*: no speculative points"));
  EXPECT_THAT(r.output, HasSubstr("no figure fits these results"));
}

}  // namespace
}  // namespace speclab
