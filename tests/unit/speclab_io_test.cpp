// speclab.io (python/speclab/io.py), the notebooks' reader, run by Debian's /usr/bin/python3 from
// the source tree's python/ folder (it needs no compiled extension) on a real
// run's output: load_summary gives one row per sweep point, load_run the datasets and attributes.
// Skipped where /usr/bin/python3, h5py or pandas is missing.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cstdlib>
#include <filesystem>
#include <string>

#include "tests/support/cli_run.hpp"
#include "tests/support/experiment_fixture.hpp"

namespace speclab {
namespace {

namespace fs = std::filesystem;

int shell(const std::string& command) {
  const int raw = std::system(command.c_str());
  return WIFEXITED(raw) ? WEXITSTATUS(raw) : -1;
}

TEST(SpeclabIo, LoadsTheSummaryAndARunFromPython) {
  if (!fs::exists("/usr/bin/python3") ||
      shell("/usr/bin/python3 -c 'import h5py, numpy, pandas' >/dev/null 2>&1") != 0) {
    GTEST_SKIP() << "/usr/bin/python3 with h5py, numpy and pandas is not installed";
  }
  const fs::path dir = testing::fresh_test_dir();
  const fs::path config = testing::write_text(dir / "tiny.toml", testing::tiny_sweep_toml());
  const testing::CliRun run =
      testing::run_cli("run '" + config.string() + "' --out '" + (dir / "out").string() + "'");
  ASSERT_EQ(run.status, 0) << run.output;
  const std::string script = R"(
import sys
sys.path.insert(0, sys.argv[1])
import numpy as np
import speclab.io as speclab_io
df = speclab_io.load_summary(sys.argv[2])
assert len(df) == 4, len(df)
assert sorted(df["decode.gamma"].unique().tolist()) == [2, 3], df["decode.gamma"]
assert df["mean_accepted"].between(0, 3).all()
assert (df["speedup"] > 0).all()
run = speclab_io.load_run(sys.argv[2] + "/" + df["file"][0])
attrs = run["attrs"]
assert attrs["schema"] == "speclab.run" and attrs["schema_version"] == 3
assert attrs["id"] == df["id"][0]
steps = run["steps/accepted"]
assert len(steps) == attrs["steps"] == len(run["steps/emitted"])
assert int(np.sum(steps)) == attrs["accepted"]
assert run["accepted_length_histogram"].sum() == attrs["steps"]
assert run["config"]["decode"]["gamma"] == df["decode.gamma"][0]
# Each request's steps emit exactly its generated tokens.
trajectories = speclab_io.request_trajectories(run)
assert [int(t["emitted"].sum()) for t in trajectories] == run["sequences/length"].tolist()
# A version 1 file (no steps/request, position/acceptance_rate for the conditional rate) reads
# under the version 2 names, steps/request rebuilt from the step log as the writer builds it.
import shutil, h5py
old = sys.argv[2] + "/v1.h5"
shutil.copy(sys.argv[2] + "/" + df["file"][0], old)
with h5py.File(old, "r+") as f:
    f.attrs["schema_version"] = 1
    del f["steps/request"]
    for suffix in ("", "_lower95", "_upper95"):
        f.move("position/acceptance_conditional" + suffix, "position/acceptance_rate" + suffix)
        del f["position/acceptance_marginal" + suffix]
v1 = speclab_io.load_run(old)
assert (v1["steps/request"] == run["steps/request"]).all()
assert np.array_equal(v1["position/acceptance_conditional"], run["position/acceptance_conditional"],
                      equal_nan=True)
assert np.allclose(v1["position/acceptance_marginal"], run["position/acceptance_marginal"])
print("speclab_io ok")
)";
  testing::write_text(dir / "check.py", script);
  const std::string command = "/usr/bin/python3 '" + (dir / "check.py").string() + "' '" +
                              (fs::path(SPECLAB_SOURCE_DIR) / "python").string() + "' '" +
                              (dir / "out").string() + "' 2>&1";
  EXPECT_EQ(shell(command), 0);
}

}  // namespace
}  // namespace speclab
