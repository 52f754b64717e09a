// `speclab verify`: passes the shipped lossless config, catches the lossy variant, enumerates only
// the support under top-k, says when L = 1 leaves the draft out, rejects bad input with exit
// status 2.
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

// With top-k = 4 the support of two tokens has 4² = 16 sequences (plus the category outside it),
// and the length picked by default is the longest whose support fits in 4096: 4⁶.
TEST(VerifyCli, TopKEnumeratesOnlyTheSupport) {
  auto r = run_cli("verify " + config() +
                   " --set sampling.top_k=4 --length 2 --samples 20000 --json" + out("topk.h5"));
  EXPECT_EQ(r.status, 0) << r.output;
  EXPECT_THAT(r.output, HasSubstr("\"pass\": true"));
  EXPECT_THAT(r.output, HasSubstr("\"support\": 16,"));
  r = run_cli("verify " + config() + " --set sampling.top_k=4 --samples 20000 --json" +
              out("topk-auto.h5"));
  EXPECT_EQ(r.status, 0) << r.output;
  EXPECT_THAT(r.output, HasSubstr("\"length\": 6,"));
  EXPECT_THAT(r.output, HasSubstr("\"support\": 4096,"));
}

TEST(VerifyCli, LengthOneSaysTheDraftIsNotExercised) {
  const auto r = run_cli("verify " + config() + " --length 1 --samples 2000" + out("one.h5"));
  EXPECT_EQ(r.status, 0) << r.output;
  EXPECT_THAT(r.output, HasSubstr("the draft is not exercised"));
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
