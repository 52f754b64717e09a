// Distributional equivalence of a configured model pair and verifier (`speclab verify`): sample
// the first L tokens of speculative decoding many times and test their joint law against the
// target's exact joint law (the models give exact next-token probabilities), with a Pearson χ²
// at a stated power (TESTING.md "Statistical checks").
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/decode.hpp"
#include "core/model.hpp"

namespace speclab::experiments {

struct VerifyOptions {
  int64_t samples = 0;    ///< 0: the N that reaches power 0.99 at `epsilon`
  double epsilon = 0.02;  ///< total-variation distance to detect when samples = 0
  double alpha = 1e-6;    ///< false-failure rate of the verdict
  double power = 0.99;
  int64_t length = 0;  ///< tokens per sample; 0: the most with V^L ≤ 4096 (at least 1)
};

struct VerifyReport {
  bool pass = false;
  double p_value = 0.0;
  double statistic = 0.0;
  int64_t samples = 0;
  int64_t bins = 0;      ///< χ² bins after merging small expected counts
  int64_t outcomes = 0;  ///< V^L joint outcomes
  int64_t length = 0;
  double epsilon_detectable = 0.0;  ///< TV distance detected with the stated power at N
  double tv_estimate = 0.0, tv_upper = 0.0;
  int64_t impossible_outcome = -1;  ///< an outcome of probability 0 that was sampled, or -1
  double plain_p_value = 0.0;       ///< the same test on plain decoding (a control)
  double seconds = 0.0;
  std::vector<int64_t> observed;  ///< [V^L] counts
  std::vector<double> expected;   ///< [V^L] exact probabilities
};

/// Runs the check: `samples` speculative decodes of L tokens after `prompt` (in chunks with
/// independent seeds), and the same number of plain decodes as a control.
VerifyReport verify_distribution(LanguageModel& target, LanguageModel& draft,
                                 const std::vector<int32_t>& prompt, const DecodeConfig& config,
                                 const VerifyOptions& options);

}  // namespace speclab::experiments
