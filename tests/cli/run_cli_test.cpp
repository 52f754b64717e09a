// The experiment commands run as a user runs them (docs/architecture.md "experiments/"): every
// shipped config validates and expands, a small sweep runs end to end, and a run survives SIGKILL,
// SIGINT and a full disk with every finished point intact, no half file under a final name, and
// --resume completing the set; --resume refuses a changed config, and merge flags missing shards.
#include <fcntl.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include "experiments/results.hpp"
#include "experiments/sweep.hpp"
#include "tests/support/cli_run.hpp"
#include "tests/support/experiment_fixture.hpp"

namespace speclab::experiments {
namespace {

namespace fs = std::filesystem;
using speclab::testing::CliRun;
using speclab::testing::fresh_test_dir;
using speclab::testing::quoted;
using speclab::testing::read_text;
using speclab::testing::run_cli;
using speclab::testing::tiny_sweep_toml;
using speclab::testing::write_text;
using ::testing::HasSubstr;
using ::testing::Not;

const fs::path kConfigs = fs::path(SPECLAB_SOURCE_DIR) / "experiments" / "configs";

// Eight points of a few thousand tokens each: long enough that a kill lands mid-sweep.
constexpr const char* kKillableSweep = R"(seed = 9
[target]
model = "lsm-tiny-target"
[draft]
model = "lsm-tiny-draft"
[decode]
batch_size = 4
sequences = 32
max_new_tokens = 96
[sweep]
decode.gamma = [1, 2, 3, 4, 5, 6, 7, 8]
)";

std::vector<fs::path> with_suffix(const fs::path& dir, const std::string& suffix) {
  std::vector<fs::path> files;
  if (!fs::exists(dir)) return files;
  for (const auto& e : fs::directory_iterator(dir)) {
    if (e.path().filename().string().ends_with(suffix)) files.push_back(e.path());
  }
  return files;
}

// Starts `speclab ARGS...` with output to `log`; returns its pid.
pid_t spawn_cli(const std::vector<std::string>& args, const fs::path& log) {
  std::vector<std::string> all = {SPECLAB_CLI};
  all.insert(all.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (std::string& a : all) argv.push_back(a.data());
  argv.push_back(nullptr);
  const std::string log_path = log.string();
  const pid_t pid = fork();
  if (pid == 0) {
    const int fd = ::open(log_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    ::dup2(fd, 1);
    ::dup2(fd, 2);
    ::execv(argv[0], argv.data());
    ::_exit(127);
  }
  return pid;
}

// Waits until a result file is finished in `dir` and the next one is being written (or the
// process ends); true if the process is still running.
bool wait_for_first_point(pid_t pid, const fs::path& dir, int& status) {
  for (;;) {
    if (!with_suffix(dir, ".h5").empty() && !with_suffix(dir, ".partial").empty()) return true;
    if (waitpid(pid, &status, WNOHANG) == pid) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
}

// Every file under a final name is a complete result of the point it is named after.
void expect_only_complete_results(const fs::path& dir) {
  for (const fs::path& file : with_suffix(dir, ".h5")) {
    EXPECT_EQ(read_result_id(file), file.stem().string()) << file;
  }
}

TEST(RunCli, EveryShippedConfigValidatesAndExpands) {
  int configs = 0;
  for (const auto& entry : fs::directory_iterator(kConfigs)) {
    if (entry.path().extension() != ".toml") continue;
    // Configs of the real model need its file (tests/model/ runs them when it is present).
    if (read_text(entry.path()).find("smollm2") != std::string::npos &&
        !fs::exists(kConfigs / "../../data/models/SmolLM2-135M-Instruct.Q4_1.gguf")) {
      continue;
    }
    ++configs;
    const CliRun validate = run_cli("validate " + quoted(entry.path()));
    EXPECT_EQ(validate.status, 0) << validate.output;
    EXPECT_THAT(validate.output, HasSubstr(": OK: "));
    const CliRun expand = run_cli("expand " + quoted(entry.path()));
    EXPECT_EQ(expand.status, 0) << expand.output;
    const Sweep sweep = load_sweep(entry.path());
    for (const SweepPoint& p : sweep.points) EXPECT_THAT(expand.output, HasSubstr(p.id));
  }
  EXPECT_GE(configs, 5);
}

// Numbers in JSON are the shortest text that reads back as the same double: a swept 0.3 is 0.3,
// not 0.29999999999999999 (the 17 significant digits that print every double exactly).
TEST(RunCli, JsonNumbersAreShortestRoundTrips) {
  const CliRun expand = run_cli(
      "expand " + quoted(kConfigs / "acceptance_vs_gamma.toml") +
      " --set 'sweep.sampling.temperature=[0.3,0.7]' --set 'sweep.decode.gamma=[1]' --json");
  ASSERT_EQ(expand.status, 0) << expand.output;
  EXPECT_THAT(expand.output, HasSubstr("\"sampling.temperature\": 0.3,"));
  EXPECT_THAT(expand.output, HasSubstr("\"sampling.temperature\": 0.7,"));
  EXPECT_THAT(expand.output, Not(HasSubstr("0.2999")));
  EXPECT_THAT(expand.output, Not(HasSubstr("0.6999")));
}

TEST(RunCli, SmallSweepRunsEndToEndAndInspects) {
  const fs::path dir = fresh_test_dir();
  const fs::path config = write_text(dir / "tiny.toml", tiny_sweep_toml());
  const CliRun run = run_cli("run " + quoted(config) + " --out " + quoted(dir / "out") +
                             " --jobs 2 --set decode.max_new_tokens=10");
  ASSERT_EQ(run.status, 0) << run.output;
  EXPECT_THAT(run.output, HasSubstr("ran 4, skipped 0"));
  EXPECT_EQ(with_suffix(dir / "out", ".h5").size(), 4u);
  EXPECT_TRUE(with_suffix(dir / "out", ".partial").empty());
  const std::string summary = read_text(dir / "out" / "summary.csv");
  EXPECT_EQ(std::count(summary.begin(), summary.end(), '\n'), 5);
  const fs::path file = with_suffix(dir / "out", ".h5").front();
  const CliRun inspect = run_cli("inspect " + quoted(file));
  ASSERT_EQ(inspect.status, 0) << inspect.output;
  EXPECT_THAT(inspect.output, HasSubstr("schema \"speclab.run\" version 3"));
  EXPECT_THAT(inspect.output, HasSubstr("steps/accepted"));
  EXPECT_THAT(inspect.output, HasSubstr("chunked deflate extendable"));
  EXPECT_THAT(inspect.output, HasSubstr("max_new_tokens = 10"));

  // Again without --resume: refused, nothing lost; with --resume: nothing to do.
  const CliRun again = run_cli("run " + quoted(config) + " --out " + quoted(dir / "out") +
                               " --set decode.max_new_tokens=10");
  EXPECT_EQ(again.status, 2) << again.output;
  EXPECT_THAT(again.output, HasSubstr("pass --resume"));
  const CliRun resumed = run_cli("run " + quoted(config) + " --out " + quoted(dir / "out") +
                                 " --resume --set decode.max_new_tokens=10");
  EXPECT_EQ(resumed.status, 0) << resumed.output;
  EXPECT_THAT(resumed.output, HasSubstr("ran 0, skipped 4"));
}

TEST(RunCli, BadInputExitsTwoWithClearMessages) {
  const fs::path dir = fresh_test_dir();
  const fs::path bad = write_text(dir / "bad.toml", "[target]\nmodel = \"lsm-tiny-targt\"\n");
  const CliRun validate = run_cli("validate " + quoted(bad));
  EXPECT_EQ(validate.status, 2);
  EXPECT_THAT(validate.output,
              HasSubstr("bad.toml:2:9: target.model is \"lsm-tiny-targt\"; expected a model name "
                        "(did you mean \"lsm-tiny-target\"?)"));
  EXPECT_EQ(run_cli("run " + quoted(dir / "missing.toml")).status, 2);
  const fs::path good = write_text(dir / "good.toml", tiny_sweep_toml());
  const CliRun conflict =
      run_cli("run " + quoted(good) + " --set seed=1 --set seed=2 --out " + quoted(dir / "o"));
  EXPECT_EQ(conflict.status, 2);
  EXPECT_THAT(conflict.output, HasSubstr("--set seed=2: conflicts with --set seed=1"));
  write_text(dir / "file", "x");
  const CliRun unwritable = run_cli("run " + quoted(good) + " --out " + quoted(dir / "file" / "o"));
  EXPECT_EQ(unwritable.status, 2);
  EXPECT_THAT(unwritable.output, HasSubstr("cannot create the results directory"));
  EXPECT_EQ(run_cli("run " + quoted(good) + " --shard 3/2").status, 2);
  const CliRun inspect = run_cli("inspect " + quoted(bad));
  EXPECT_EQ(inspect.status, 2);
  EXPECT_THAT(inspect.output, HasSubstr("not an HDF5 file"));
}

TEST(RunCli, KilledRunKeepsFinishedPointsAndResumeCompletesTheSet) {
  const fs::path dir = fresh_test_dir();
  const fs::path config = write_text(dir / "kill.toml", kKillableSweep);
  const fs::path out = dir / "out";
  const pid_t pid = spawn_cli({"run", config.string(), "--out", out.string()}, dir / "run.log");
  int status = 0;
  const bool running = wait_for_first_point(pid, out, status);
  if (running) {
    kill(pid, SIGKILL);
    waitpid(pid, &status, 0);
  }
  ASSERT_FALSE(with_suffix(out, ".h5").empty()) << read_text(dir / "run.log");
  expect_only_complete_results(out);
  const size_t partials = with_suffix(out, ".partial").size();
  if (running) EXPECT_EQ(partials, 1u);  // SIGKILL leaves the point being written as .partial

  const CliRun resumed = run_cli("run " + quoted(config) + " --out " + quoted(out) + " --resume");
  ASSERT_EQ(resumed.status, 0) << resumed.output;
  if (partials > 0) EXPECT_THAT(resumed.output, HasSubstr("removed 1 unfinished .partial file"));
  EXPECT_EQ(with_suffix(out, ".h5").size(), 8u);
  EXPECT_TRUE(with_suffix(out, ".partial").empty());
  expect_only_complete_results(out);
  const std::string summary = read_text(out / "summary.csv");
  EXPECT_EQ(std::count(summary.begin(), summary.end(), '\n'), 9);
}

TEST(RunCli, InterruptedRunStopsCleanlyAndSaysHowToResume) {
  const fs::path dir = fresh_test_dir();
  const fs::path config = write_text(dir / "int.toml", kKillableSweep);
  const fs::path out = dir / "out";
  const pid_t pid = spawn_cli({"run", config.string(), "--out", out.string()}, dir / "run.log");
  int status = 0;
  if (wait_for_first_point(pid, out, status)) {
    kill(pid, SIGINT);
    waitpid(pid, &status, 0);
  }
  const std::string log = read_text(dir / "run.log");
  if (WIFSIGNALED(status)) {
    EXPECT_EQ(WTERMSIG(status), SIGINT);
    EXPECT_THAT(log, HasSubstr("interrupted by SIGINT"));
    EXPECT_THAT(log, HasSubstr("rerun with --resume"));
  } else {
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << log;  // finished first
  }
  EXPECT_TRUE(with_suffix(out, ".partial").empty()) << log;
  expect_only_complete_results(out);
  // The summary lists exactly the finished points.
  const std::string summary = read_text(out / "summary.csv");
  EXPECT_EQ(static_cast<size_t>(std::count(summary.begin(), summary.end(), '\n')),
            with_suffix(out, ".h5").size() + 1);
}

TEST(RunCli, FullDiskFailsWithExitTwoAndKeepsFinishedPoints) {
  const fs::path dir = fresh_test_dir();
  // The second point's file outgrows a 160 KiB file-size limit, which fails writes with EFBIG
  // as a full disk fails them with ENOSPC.
  const fs::path config = write_text(dir / "big.toml", R"([target]
model = "lsm-tiny-target"
[draft]
model = "lsm-tiny-draft"
[decode]
batch_size = 64
sequences = 64
[sweep]
decode.max_new_tokens = [4, 4096]
)");
  const fs::path out = dir / "out";
  const std::string command = "bash -c \"ulimit -f 160; trap '' XFSZ; exec '" +
                              std::string(SPECLAB_CLI) + "' run " + quoted(config) + " --out " +
                              quoted(out) + "\" 2>&1";
  FILE* pipe = popen(command.c_str(), "r");
  ASSERT_NE(pipe, nullptr);
  std::string output;
  char buffer[4096];
  while (const size_t n = std::fread(buffer, 1, sizeof buffer, pipe)) output.append(buffer, n);
  const int raw = pclose(pipe);
  ASSERT_TRUE(WIFEXITED(raw)) << output;
  EXPECT_EQ(WEXITSTATUS(raw), 2) << output;
  EXPECT_THAT(output, HasSubstr("File too large"));
  EXPECT_THAT(output, HasSubstr("finished points are kept"));
  EXPECT_EQ(with_suffix(out, ".h5").size(), 1u);
  EXPECT_TRUE(with_suffix(out, ".partial").empty());
  expect_only_complete_results(out);
}

TEST(RunCli, ShardsRunSeparatelyAndMergeIntoOneSummary) {
  const fs::path dir = fresh_test_dir();
  const fs::path config = write_text(dir / "tiny.toml", tiny_sweep_toml());
  for (const char* shard : {"1/3", "2/3", "3/3"}) {
    const CliRun run =
        run_cli("run " + quoted(config) + " --out " + quoted(dir / "shared") + " --shard " + shard);
    ASSERT_EQ(run.status, 0) << run.output;
  }
  EXPECT_EQ(with_suffix(dir / "shared", ".csv").size(), 3u);  // one summary per shard
  const CliRun merge = run_cli("merge " + quoted(dir / "shared") + " -o " + quoted(dir / "shared"));
  ASSERT_EQ(merge.status, 0) << merge.output;
  EXPECT_THAT(merge.output, HasSubstr("4 sweep points"));
  const std::string summary = read_text(dir / "shared" / "summary.csv");
  EXPECT_EQ(std::count(summary.begin(), summary.end(), '\n'), 5);
  EXPECT_EQ(run_cli("merge " + quoted(dir / "nowhere") + " -o " + quoted(dir / "m")).status, 2);
}

TEST(RunCli, MergeOfAnIncompleteShardSetWarnsAndExitsThree) {
  const fs::path dir = fresh_test_dir();
  const fs::path config = write_text(dir / "tiny.toml", tiny_sweep_toml());
  for (const char* shard : {"1/3", "3/3"}) {  // shard 2/3 (point index 1) never ran
    const CliRun run =
        run_cli("run " + quoted(config) + " --out " + quoted(dir / "shared") + " --shard " + shard);
    ASSERT_EQ(run.status, 0) << run.output;
  }
  const std::string merge = "merge " + quoted(dir / "shared") + " -o " + quoted(dir / "merged");
  const CliRun incomplete = run_cli(merge);
  EXPECT_EQ(incomplete.status, 3) << incomplete.output;
  EXPECT_THAT(incomplete.output,
              HasSubstr("warning: incomplete: sweep 'tiny' (4 points): 3 merged, 1 missing "
                        "(index 1)"));
  EXPECT_THAT(incomplete.output, HasSubstr("--allow-incomplete"));
  const std::string summary = read_text(dir / "merged" / "summary.csv");
  EXPECT_EQ(std::count(summary.begin(), summary.end(), '\n'), 4);  // what there is, merged
  const CliRun allowed = run_cli(merge + " --allow-incomplete");
  EXPECT_EQ(allowed.status, 0) << allowed.output;
  EXPECT_THAT(allowed.output, HasSubstr("1 missing"));
}

TEST(RunCli, ResumeAfterChangingANonSweptKeyIsRefused) {
  const fs::path dir = fresh_test_dir();
  const fs::path config = write_text(dir / "tiny.toml", tiny_sweep_toml());
  const std::string run = "run " + quoted(config) + " --out " + quoted(dir / "out");
  ASSERT_EQ(run_cli(run).status, 0);
  const std::string summary = read_text(dir / "out" / "summary.csv");
  // A key outside the sweep's axes changes every point's id, so none of the files is skipped and
  // the summary would be rewritten without them.
  const CliRun changed = run_cli(run + " --resume --set decode.max_new_tokens=10");
  EXPECT_EQ(changed.status, 2) << changed.output;
  EXPECT_THAT(changed.output, HasSubstr("holds 4 result file(s) of sweep 'tiny' that are not "
                                        "points of this config"));
  EXPECT_THAT(changed.output, HasSubstr("decode.max_new_tokens = 12 (now 10)"));
  EXPECT_EQ(read_text(dir / "out" / "summary.csv"), summary);
  EXPECT_EQ(with_suffix(dir / "out", ".h5").size(), 4u);
  // Unchanged, --resume still has nothing to do.
  const CliRun same = run_cli(run + " --resume");
  EXPECT_EQ(same.status, 0) << same.output;
  EXPECT_THAT(same.output, HasSubstr("ran 0, skipped 4"));
}

TEST(RunCli, ReadmeAnnotatedExampleValidates) {
  const std::string readme = read_text(fs::path(SPECLAB_SOURCE_DIR) / "experiments" / "README.md");
  const size_t section = readme.find("Annotated example");
  ASSERT_NE(section, std::string::npos);
  const size_t begin = readme.find("```toml\n", section);
  ASSERT_NE(begin, std::string::npos);
  const size_t end = readme.find("```", begin + 8);
  const fs::path dir = fresh_test_dir();
  const fs::path config =
      write_text(dir / "example.toml", readme.substr(begin + 8, end - begin - 8));
  const CliRun validate = run_cli("validate " + quoted(config));
  EXPECT_EQ(validate.status, 0) << validate.output;
  EXPECT_THAT(validate.output, HasSubstr("OK: \"example\", 12 sweep points"));
}

}  // namespace
}  // namespace speclab::experiments
