// `speclab bench gpu` where no device can be used (CUDA_VISIBLE_DEVICES hides every device, or
// the build has no CUDA): it says why, measures nothing and exits 0; bad options still exit 2.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cstdio>
#include <string>

namespace speclab {
namespace {

struct CliResult {
  int status = -1;
  std::string output;
};

// The shell sets CUDA_VISIBLE_DEVICES for the one command, so no device is visible even on a
// machine that has one.
CliResult run_hidden(const std::string& arguments) {
  const std::string command =
      std::string("CUDA_VISIBLE_DEVICES= '") + SPECLAB_CLI + "' " + arguments + " 2>&1";
  FILE* pipe = popen(command.c_str(), "r");
  CliResult run;
  if (pipe == nullptr) return run;
  char buffer[4096];
  while (const size_t n = std::fread(buffer, 1, sizeof buffer, pipe)) run.output.append(buffer, n);
  const int raw = pclose(pipe);
  run.status = WIFEXITED(raw) ? WEXITSTATUS(raw) : -1;
  return run;
}

bool says_why(const std::string& output) {
  return output.find("no CUDA device") != std::string::npos ||
         output.find("built without CUDA") != std::string::npos;
}

TEST(BenchGpuCli, WithoutDeviceSaysSoAndExitsZero) {
  const CliResult text = run_hidden("bench gpu");
  EXPECT_EQ(text.status, 0) << text.output;
  EXPECT_NE(text.output.find("nothing measured"), std::string::npos) << text.output;
  EXPECT_TRUE(says_why(text.output)) << text.output;

  const CliResult json = run_hidden("bench gpu --json");
  EXPECT_EQ(json.status, 0) << json.output;
  EXPECT_NE(json.output.find("\"device\": null"), std::string::npos) << json.output;
  EXPECT_TRUE(says_why(json.output)) << json.output;
}

TEST(BenchGpuCli, BadRepeatsIsRejected) {
  const CliResult run = run_hidden("bench gpu --repeats 1");
  EXPECT_EQ(run.status, 2) << run.output;
  EXPECT_NE(run.output.find("--repeats"), std::string::npos) << run.output;
}

TEST(BenchGpuCli, ShapeFilterOutOfRangeIsRejectedBeforeAnyDeviceWork) {
  for (const char* bad : {"--vocab 0", "--batch 0,8", "--batch 5000", "--gamma -1"}) {
    const CliResult run = run_hidden(std::string("bench gpu ") + bad);
    EXPECT_EQ(run.status, 2) << bad << ": " << run.output;
    EXPECT_NE(run.output.find("is out of range"), std::string::npos) << bad << ": " << run.output;
  }
  const CliResult fine = run_hidden("bench gpu --vocab 128256 --batch 1,64 --gamma 5 --json");
  EXPECT_EQ(fine.status, 0) << fine.output;
}

#if defined(SPECLAB_HAVE_CUDA)
// The kernel names exist only in a CUDA build: there --only must match one of them.
TEST(BenchGpuCli, OnlyThatMatchesNoKernelNamesTheKernels) {
  const CliResult run = run_hidden("bench gpu --only nonsense");
  EXPECT_EQ(run.status, 2) << run.output;
  EXPECT_NE(run.output.find("matches no kernel; the kernels: "), std::string::npos) << run.output;
  EXPECT_NE(run.output.find("verify_block V5 split"), std::string::npos) << run.output;
  EXPECT_EQ(run_hidden("bench gpu --only \"verify_chain V1\" --json").status, 0);
}
#endif

}  // namespace
}  // namespace speclab
