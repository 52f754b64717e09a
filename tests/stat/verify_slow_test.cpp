// Nightly (label `slow`): every lossless verifier, through the decoding engine on the tiny
// LinearSoftmax pair, reproduces the target's joint law of four tokens at a power that detects a
// total-variation distance of 0.005 (N ≈ 2M per verifier). The target samples with top-k = 4, so
// the four-token support has at most 4^4 = 256 outcomes; four tokens let the first step draft the
// full γ = 3 (the engine drafts min(γ, tokens left − 1)), so block verification runs at γ = 3 and
// is not V1, and trees reach depth 2. Run with fresh seeds:
//   SPECLAB_STAT_SEED=$RANDOM ctest --test-dir build -L slow
#include <gtest/gtest.h>

#include <algorithm>
#include <string>

#include "core/decode/decode.hpp"
#include "core/models/model_registry.hpp"
#include "core/equivalence/verify_distribution.hpp"
#include "tests/support/stat_support.hpp"

namespace speclab {
namespace {

class LosslessVerifier : public ::testing::TestWithParam<const char*> {};

TEST_P(LosslessVerifier, JointLawOfFourTokensIsTheTargets) {
  auto target = make_model("lsm-tiny-target");
  auto draft = make_model("lsm-tiny-draft");
  DecodeConfig config{.sampling = {.top_k = 4},
                      .seed = testing::stat_seed(GetParam()),
                      .gamma = 3,
                      .verifier = make_verifier(GetParam(), {2, 2})};
  // Six verifiers share the 1e-6 budget (greedy is lossless against greedy decoding only).
  const VerifyOptions options{.epsilon = 0.005,
                              .alpha = bonferroni_level(testing::kStatSuiteFalseFailureRate, 6),
                              .length = 4};
  const auto report = verify_distribution(*target, *draft, {3, 1, 4, 1}, config, options);
  std::cout << "[stat] " << GetParam() << ": N=" << report.samples << " bins=" << report.bins
            << " p=" << report.p_value << " eps=" << report.epsilon_detectable
            << " tv=" << report.tv_estimate << " seed=" << config.seed << std::endl;
  EXPECT_TRUE(report.draft_exercised);
  EXPECT_TRUE(report.pass) << GetParam() << ": p = " << report.p_value;
}

INSTANTIATE_TEST_SUITE_P(Slow, LosslessVerifier,
                         ::testing::Values("token", "block", "tree-iid", "tree-swor", "tree-topk",
                                           "kseq", "traversal"),
                         [](const auto& info) {
                           std::string name = info.param;
                           std::replace(name.begin(), name.end(), '-', '_');
                           return name;
                         });

}  // namespace
}  // namespace speclab
