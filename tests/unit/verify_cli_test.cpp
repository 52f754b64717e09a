// `speclab verify`: passes the shipped lossless config, catches the lossy variant, rejects bad
// input with exit status 2.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <string>

#include "tests/support/cli_run.hpp"

namespace speclab {
namespace {

using ::testing::HasSubstr;
using testing::run_cli;

std::string config() {
  return std::string("--config '") + SPECLAB_SOURCE_DIR + "/experiments/configs/verify_token.toml'";
}

std::string out(const char* name) {
  const auto dir = std::filesystem::path(SPECLAB_BINARY_DIR) / "test-output" / "verify";
  std::filesystem::create_directories(dir);
  return " --out '" + (dir / name).string() + "'";
}

TEST(VerifyCli, LosslessConfigPasses) {
  const auto r =
      run_cli("verify " + config() + " --length 2 --samples 60000 --json" + out("token.h5"));
  EXPECT_EQ(r.status, 0) << r.output;
  for (const char* key :
       {"\"pass\": true", "\"p_value\"", "\"samples\": 60000", "\"epsilon_detectable\""}) {
    EXPECT_THAT(r.output, HasSubstr(key));
  }
}

TEST(VerifyCli, LenientIsCaught) {
  const auto r = run_cli("verify " + config() +
                         " --set verifier.method=lenient --set verifier.leniency=0.5 --length 2 "
                         "--samples 60000 --json" +
                         out("lenient.h5"));
  EXPECT_EQ(r.status, 1) << r.output;
  EXPECT_THAT(r.output, HasSubstr("\"pass\": false"));
}

TEST(VerifyCli, BadInputExitsTwo) {
  auto r = run_cli("verify " + config() + " --epsilon 1.5" + out("bad.h5"));
  EXPECT_EQ(r.status, 2);
  EXPECT_THAT(r.output, HasSubstr("--epsilon is 1.5"));
  r = run_cli("verify --config /nonexistent/config.toml");
  EXPECT_EQ(r.status, 2);
  EXPECT_THAT(r.output, HasSubstr("/nonexistent/config.toml"));
  r = run_cli("verify " + config() + " --length 4" + out("long.h5"));
  EXPECT_EQ(r.status, 2);
  EXPECT_THAT(r.output, HasSubstr("more than 4096 outcomes"));
}

}  // namespace
}  // namespace speclab
