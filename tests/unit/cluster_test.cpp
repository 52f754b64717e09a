// Unit tests of experiments/cluster (experiments/README.md "Cluster scale"): the Slurm job-array
// script (its #SBATCH lines, the arguments each task's shell really passes to speclab, bad options)
// and the state of a sweep's points across shard directories (done, partial, missing, damaged; N
// inferred).
#include "experiments/cluster.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>

#include "experiments/runner.hpp"
#include "tests/support/experiment_fixture.hpp"

namespace speclab::experiments {
namespace {

namespace fs = std::filesystem;
using speclab::testing::fresh_test_dir;
using speclab::testing::invalid_input_message;
using speclab::testing::read_text;
using speclab::testing::tiny_sweep_toml;
using speclab::testing::write_text;
using ::testing::HasSubstr;
using ::testing::Not;

SlurmOptions options_for(const fs::path& dir) {
  SlurmOptions o;
  o.speclab = dir / "speclab";
  o.config = dir / "tiny.toml";
  o.out = dir / "results";
  return o;
}

std::string shell_output(const std::string& command) {
  FILE* pipe = popen(command.c_str(), "r");
  std::string out;
  char buffer[4096];
  while (const size_t n = std::fread(buffer, 1, sizeof buffer, pipe)) out.append(buffer, n);
  pclose(pipe);
  return out;
}

TEST(SlurmScript, OneArrayTaskPerShardWithTheSbatchOptions) {
  const fs::path dir = fresh_test_dir();
  const Sweep sweep = load_sweep(write_text(dir / "tiny.toml", tiny_sweep_toml()));  // 4 points
  SlurmOptions o = options_for(dir);
  const std::string whole = slurm_script(sweep, o);
  EXPECT_THAT(whole, HasSubstr("\n#SBATCH --array=1-4\n"));  // default: one task per point
  EXPECT_THAT(whole, HasSubstr("\n#SBATCH --job-name=speclab-tiny\n"));
  EXPECT_THAT(whole, Not(HasSubstr("--partition")));
  EXPECT_THAT(whole, Not(HasSubstr("--time")));
  EXPECT_THAT(whole,
              HasSubstr("\n#SBATCH --output=" + (dir / "results").string() + "/slurm-%A_%a.out\n"));
  o.array_size = 2;
  o.partition = "gpu";
  o.time = "1-12:00:00";
  o.jobs = 2;
  const std::string two = slurm_script(sweep, o);
  EXPECT_THAT(two, HasSubstr("\n#SBATCH --array=1-2\n"));
  EXPECT_THAT(two, HasSubstr("\n#SBATCH --partition=gpu\n"));
  EXPECT_THAT(two, HasSubstr("\n#SBATCH --time=1-12:00:00\n"));
  EXPECT_THAT(two, HasSubstr("\n#SBATCH --cpus-per-task=2\n"));
  EXPECT_TRUE(two.starts_with("#!/bin/bash\n"));
}

// The script run by bash as Slurm runs it (task 2 of 3), with a stand-in speclab that prints its
// arguments one per line: every value arrives whole, quotes and spaces included.
TEST(SlurmScript, EachTaskRunsItsShardWithResumeAndTheOverrides) {
  const fs::path base = fresh_test_dir();
  const fs::path dir = base / "it's here";
  fs::create_directories(dir);
  const Sweep sweep = load_sweep(write_text(dir / "tiny.toml", tiny_sweep_toml()));
  SlurmOptions o = options_for(dir);
  o.out = base / "results";
  o.speclab = write_text(dir / "speclab", "#!/bin/sh\nfor a in \"$@\"; do echo \"[$a]\"; done\n");
  ::chmod(o.speclab.c_str(), 0755);
  o.sets = {"decode.max_new_tokens=8", "workload.name=a 'b' c"};
  o.array_size = 3;
  const fs::path script = write_text(dir / "sweep.sh", slurm_script(sweep, o));
  ::setenv("SPECLAB_TEST_SCRIPT", script.c_str(), 1);  // its path holds a quote too
  const std::string args =
      shell_output("SLURM_ARRAY_TASK_ID=2 SLURM_ARRAY_TASK_COUNT=3 bash \"$SPECLAB_TEST_SCRIPT\"");
  const std::string expected = "[run]\n[" + (dir / "tiny.toml").string() +
                               "]\n[--set]\n[decode.max_new_tokens=8]\n[--set]\n"
                               "[workload.name=a 'b' c]\n[--out]\n[" +
                               o.out.string() + "]\n[--shard]\n[2/3]\n[--resume]\n[--jobs]\n[1]\n";
  EXPECT_EQ(args, expected);
}

TEST(SlurmScript, BadOptionsAreRefusedNamingTheOption) {
  const fs::path dir = fresh_test_dir();
  const Sweep sweep = load_sweep(write_text(dir / "tiny.toml", tiny_sweep_toml()));
  SlurmOptions o = options_for(dir);
  o.array_size = 5;
  EXPECT_THAT(invalid_input_message([&] { slurm_script(sweep, o); }),
              HasSubstr("--array-size 5: expected 1 to 4"));
  o.array_size = -1;
  EXPECT_THAT(invalid_input_message([&] { slurm_script(sweep, o); }), HasSubstr("--array-size"));
  o.array_size = 0;
  o.time = "90min";
  EXPECT_THAT(invalid_input_message([&] { slurm_script(sweep, o); }), HasSubstr("--time '90min'"));
  for (const char* good : {"30", "30:00", "1:30:00", "2-0", "2-12:30", "2-12:30:00"}) {
    EXPECT_NO_THROW(check_slurm_time(good)) << good;
  }
  for (const char* bad : {"", "1:2:3:4", "-1", "1-", "a", "1-2-3"}) {
    EXPECT_THROW(check_slurm_time(bad), InvalidInput) << bad;
  }
  o.time.clear();
  o.partition = "gpu; rm -rf /";
  EXPECT_THAT(invalid_input_message([&] { slurm_script(sweep, o); }), HasSubstr("--partition"));
  o.partition.clear();
  o.out = dir / "with space";
  EXPECT_THAT(invalid_input_message([&] { slurm_script(sweep, o); }), HasSubstr("whitespace"));
  o.out = dir / "results";
  o.jobs = 0;
  EXPECT_THAT(invalid_input_message([&] { slurm_script(sweep, o); }), HasSubstr("--jobs 0"));
}

// Shard 1/2 run (points 0 and 2), point 1's file being written, point 3 never started; then
// point 3's name taken by garbage, then by another point's file.
TEST(SweepStatus, DonePartialMissingAndDamagedAcrossShards) {
  const fs::path dir = fresh_test_dir();
  const Sweep sweep = load_sweep(write_text(dir / "tiny.toml", tiny_sweep_toml()));
  RunOptions run;
  run.out = dir / "shard1";
  run.shard = {1, 2};
  run.progress.out = nullptr;
  run_sweep(sweep, run);
  fs::create_directories(dir / "shard2");
  write_text(dir / "shard2" / (sweep.points[1].id + ".h5.partial"), "half");
  const fs::path dirs[] = {dir / "shard1", dir / "shard2"};

  SweepStatus st = sweep_status(sweep, dirs, std::nullopt);
  EXPECT_EQ(st.shards, 2);  // from summary.shard-1-of-2.csv
  ASSERT_EQ(st.points.size(), 4u);
  const PointState expected[] = {PointState::kDone, PointState::kPartial, PointState::kDone,
                                 PointState::kMissing};
  for (size_t i = 0; i < 4; ++i) {
    EXPECT_EQ(st.points[i].state, expected[i]) << i;
    EXPECT_EQ(st.points[i].shard, static_cast<int64_t>(i % 2 + 1)) << i;
    EXPECT_EQ(st.points[i].id, sweep.points[i].id);
  }
  EXPECT_EQ(st.points[0].path, dir / "shard1" / (sweep.points[0].id + ".h5"));
  EXPECT_EQ(st.count(PointState::kDone), 2);
  EXPECT_FALSE(st.complete());

  write_text(dir / "shard2" / (sweep.points[3].id + ".h5"), "not hdf5");
  st = sweep_status(sweep, dirs, std::nullopt);
  EXPECT_EQ(st.points[3].state, PointState::kDamaged);
  fs::copy_file(dir / "shard1" / (sweep.points[0].id + ".h5"),
                dir / "shard2" / (sweep.points[3].id + ".h5"),
                fs::copy_options::overwrite_existing);
  st = sweep_status(sweep, dirs, 4);
  EXPECT_EQ(st.shards, 4);
  EXPECT_EQ(st.points[3].state, PointState::kDamaged);
  EXPECT_THAT(st.points[3].detail, HasSubstr(sweep.points[0].id));
  EXPECT_EQ(st.points[3].shard, 4);

  // The rest run: complete, whichever directory holds each point.
  fs::remove(dir / "shard2" / (sweep.points[3].id + ".h5"));
  run.out = dir / "shard2";
  run.shard = {2, 2};
  run.resume = true;
  run_sweep(sweep, run);
  st = sweep_status(sweep, dirs, std::nullopt);
  EXPECT_TRUE(st.complete());
  EXPECT_EQ(st.count(PointState::kPartial), 0);
}

TEST(SweepStatus, BadDirectoriesAndShardCountsAreRefused) {
  const fs::path dir = fresh_test_dir();
  const Sweep sweep = load_sweep(write_text(dir / "tiny.toml", tiny_sweep_toml()));
  const fs::path nowhere[] = {dir / "nowhere"};
  EXPECT_THAT(invalid_input_message([&] { sweep_status(sweep, nowhere, std::nullopt); }),
              HasSubstr("nowhere: no such directory"));
  fs::create_directories(dir / "out");
  write_text(dir / "out" / "summary.shard-1-of-2.csv", "");
  write_text(dir / "out" / "summary.shard-1-of-3.csv", "");
  const fs::path mixed[] = {dir / "out"};
  EXPECT_THAT(invalid_input_message([&] { sweep_status(sweep, mixed, std::nullopt); }),
              HasSubstr("--shards"));
  EXPECT_EQ(sweep_status(sweep, mixed, 3).shards, 3);
  EXPECT_THAT(invalid_input_message([&] { sweep_status(sweep, mixed, 0); }),
              HasSubstr("--shards 0"));
}

}  // namespace
}  // namespace speclab::experiments
