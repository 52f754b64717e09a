// Distributional equivalence of a configured model pair and verifier (`speclab verify`): sample
// the first L tokens of speculative decoding many times and test their joint law against the
// target's exact joint law (the models give exact next-token probabilities), with a Pearson χ²
// at a stated power (docs/testing.md "Statistical checks").
//
// The outcomes are the support tree of the target after the sampling pipeline (docs/verifiers.md: p
// is taken after temperature, top-k, top-p and min-p): every sequence of L tokens (or fewer, ending
// in EOS) whose exact probability is positive, in lexicographic order, plus, when that is not
// all V^L sequences, one last category "outside the support" of probability 0 (sampling into it
// fails the check as an impossible outcome). Without filters and EOS the support is all V^L
// sequences, indexed t_1·V^(L-1) + … + t_L.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "core/decode/decode.hpp"
#include "core/decode/decode_vocab.hpp"
#include "core/models/model.hpp"

namespace speclab {

/// What one decode call of the check did, for a progress display.
struct VerifyProgress {
  int64_t planned_tokens = 0;  ///< 2·N·L: the speculative samples and the plain control
  int64_t tokens = 0;          ///< tokens decoded by this call
  int64_t accepted_positions = 0, tested_positions = 0;  ///< its draft positions (0 for plain)
};

struct VerifyOptions {
  int64_t samples = 0;    ///< 0: the N that reaches power 0.99 at `epsilon`
  double epsilon = 0.02;  ///< total-variation distance to detect when samples = 0
  double alpha = 1e-6;    ///< false-failure rate of the verdict
  double power = 0.99;
  /// tokens per sample; 0: the most whose support has ≤ 4096 sequences (at least 1, at most 16)
  int64_t length = 0;
  /// Called after every decode call (a chunk of samples); may be empty.
  std::function<void(const VerifyProgress&)> progress;
  /// A draft of another vocabulary (tli, slem, slrs; core/decode/decode_vocab.hpp), or nullptr.
  const VocabBridge* bridge = nullptr;
};

struct VerifyReport {
  bool pass = false;
  double p_value = 0.0;
  double statistic = 0.0;
  int64_t samples = 0;
  int64_t bins = 0;      ///< χ² bins after merging small expected counts
  int64_t outcomes = 0;  ///< categories: the support, plus one outside it unless that is empty
  int64_t support = 0;   ///< sequences of positive exact probability
  int64_t length = 0;
  /// Whether the verifier tested any draft token: γ_b = min(γ, L − 1), so not at L = 1, nor when
  /// every sample ends in EOS at once; the check then tests only the target's own sampling.
  bool draft_exercised = false;
  int64_t tested_positions = 0;     ///< draft positions the verifier tested over the N samples
  bool memoised = false;            ///< rows were computed once per prefix (models with V > 4096)
  double epsilon_detectable = 0.0;  ///< TV distance detected with the stated power at N
  double tv_estimate = 0.0, tv_upper = 0.0;
  int64_t impossible_outcome = -1;  ///< an outcome of probability 0 that was sampled, or -1
  double plain_p_value = 0.0;       ///< the same test on plain decoding (a control)
  double seconds = 0.0;
  std::vector<int64_t> observed;                ///< [outcomes] counts
  std::vector<double> expected;                 ///< [outcomes] exact probabilities
  std::vector<std::vector<int32_t>> sequences;  ///< [support] the tokens of each outcome
};

/// Runs the check: `samples` speculative decodes of L tokens after `prompt` (in chunks with
/// independent seeds), and the same number of plain decodes as a control. For V > 4096 both
/// models are wrapped in a MemoModel (core/models/memo.hpp), so each distinct prefix is scored
/// once, and requests are decoded 2^20 / V at a time (at least 16). InvalidInput when the support
/// of even one token has more than 4096 sequences (naming sampling.top_k / top_p), or when an
/// explicit length's does.
VerifyReport verify_distribution(LanguageModel& target, LanguageModel& draft,
                                 const std::vector<int32_t>& prompt, const DecodeConfig& config,
                                 const VerifyOptions& options);

}  // namespace speclab
