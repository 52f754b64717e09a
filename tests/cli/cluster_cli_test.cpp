// `speclab slurm` and `speclab status` as a user runs them (experiments/README.md "Cluster scale"):
// the script written with -o (executable, the results directory made), bad options exit 2 naming
// the option, and status listing a half-run sharded sweep per shard and per point, exit 3 until
// every point is done, then 0; --json with the same counts. The real cluster run is
// tests/cluster/slurm_sweep.sh (ctest Cluster.SlurmJobArrayMatchesOneProcess).
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <filesystem>
#include <string>

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

TEST(ClusterCli, SlurmWritesAnExecutableScriptAndMakesTheResultsDirectory) {
  const fs::path dir = fresh_test_dir();
  const fs::path config = write_text(dir / "tiny.toml", tiny_sweep_toml());
  const CliRun run =
      run_cli("slurm " + quoted(config) + " --results " + quoted(dir / "results") +
              " --array-size 2 --partition short --time 10 -o " + quoted(dir / "sweep.sh"));
  ASSERT_EQ(run.status, 0) << run.output;
  EXPECT_THAT(run.output, HasSubstr("sbatch " + (dir / "sweep.sh").string()));
  const std::string script = read_text(dir / "sweep.sh");
  EXPECT_THAT(script, HasSubstr("#SBATCH --array=1-2\n#SBATCH --ntasks=1\n"));
  EXPECT_THAT(script, HasSubstr("#SBATCH --partition=short\n#SBATCH --time=10\n"));
  EXPECT_THAT(script, HasSubstr("--shard \"$SLURM_ARRAY_TASK_ID/$SLURM_ARRAY_TASK_COUNT\" "
                                "--resume"));
  struct stat info {};
  ASSERT_EQ(::stat((dir / "sweep.sh").c_str(), &info), 0);
  EXPECT_NE(info.st_mode & S_IXUSR, 0u);
  EXPECT_TRUE(fs::is_directory(dir / "results"));  // the tasks' logs go there

  const CliRun to_stdout = run_cli("slurm " + quoted(config) + " --results " + quoted(dir / "r2"));
  ASSERT_EQ(to_stdout.status, 0) << to_stdout.output;
  EXPECT_THAT(to_stdout.output, HasSubstr("#SBATCH --array=1-4\n"));

  const CliRun bad_time = run_cli("slurm " + quoted(config) + " --time 1h");
  EXPECT_EQ(bad_time.status, 2) << bad_time.output;
  EXPECT_THAT(bad_time.output, HasSubstr("--time '1h'"));
  const CliRun bad_size = run_cli("slurm " + quoted(config) + " --array-size 9");
  EXPECT_EQ(bad_size.status, 2) << bad_size.output;
  EXPECT_THAT(bad_size.output, HasSubstr("--array-size 9: expected 1 to 4"));
  EXPECT_EQ(run_cli("slurm " + quoted(dir / "missing.toml")).status, 2);
}

TEST(ClusterCli, StatusListsPointsPerShardAndExitsThreeUntilAllAreDone) {
  const fs::path dir = fresh_test_dir();
  const fs::path config = write_text(dir / "tiny.toml", tiny_sweep_toml());
  const fs::path out = dir / "results";
  const CliRun shard = run_cli("run " + quoted(config) + " --out " + quoted(out) + " --shard 2/2");
  ASSERT_EQ(shard.status, 0) << shard.output;
  const Sweep sweep = load_sweep(config);
  write_text(out / (sweep.points[0].id + ".h5.partial"), "half");

  const CliRun half = run_cli("status " + quoted(config) + " " + quoted(out));
  EXPECT_EQ(half.status, 3) << half.output;
  EXPECT_THAT(half.output,
              HasSubstr("sweep 'tiny': 4 points in 2 shards: 2 done, 1 partial, 1 missing\n"));
  EXPECT_THAT(half.output, HasSubstr("  shard 1/2: 0 done, 1 partial, 1 missing\n"));
  EXPECT_THAT(half.output, HasSubstr("  shard 2/2: 2 done, 0 partial, 0 missing\n"));
  EXPECT_THAT(half.output, HasSubstr("      0  1/2      partial  " + sweep.points[0].id));
  EXPECT_THAT(half.output, HasSubstr("      1  2/2      done     " + sweep.points[1].id + "\n"));
  EXPECT_THAT(half.output, HasSubstr("      2  1/2      missing  " + sweep.points[2].id + "\n"));

  const CliRun json = run_cli("status " + quoted(config) + " " + quoted(out) + " --json");
  EXPECT_EQ(json.status, 3) << json.output;
  EXPECT_THAT(json.output, HasSubstr("\"points\": 4, \"shards\": 2, \"done\": 2, \"partial\": 1, "
                                     "\"missing\": 1, \"damaged\": 0"));

  const CliRun rest =
      run_cli("run " + quoted(config) + " --out " + quoted(out) + " --shard 1/2 --resume");
  ASSERT_EQ(rest.status, 0) << rest.output;
  const CliRun done = run_cli("status " + quoted(config) + " " + quoted(out));
  EXPECT_EQ(done.status, 0) << done.output;
  EXPECT_THAT(done.output, HasSubstr("4 points in 2 shards: 4 done, 0 partial, 0 missing"));

  EXPECT_EQ(run_cli("status " + quoted(config) + " " + quoted(dir / "nowhere")).status, 2);
}

}  // namespace
}  // namespace speclab::experiments
