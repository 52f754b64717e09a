// Internals shared by the chain and tree decoding engines (core/decode*.cpp).
#pragma once

#include <span>
#include <vector>

#include "core/decode/decode.hpp"

namespace speclab::detail {

double now_seconds();
void check_same_vocabulary(const LanguageModel& target, const LanguageModel& draft);
/// β = Σ_x min(p(x), q(x)) over V tokens.
double overlap(const float* p, const float* q, int64_t v);
/// Appends tokens, stopping after EOS (sets finished); returns how many were appended.
int64_t append_until_eos(std::vector<int32_t>& out, std::span<const int32_t> tokens, int32_t eos,
                         bool& finished);
/// Work done between two snapshots of a model's counters.
ModelStats stats_since(ModelStats after, const ModelStats& before);
/// The prompt pass of every engine: each model's prefill over each request in turn, timed per
/// request into m (prompt_tokens, prefill_positions, request_prefill_seconds); sizes
/// request_decode_seconds.
void prefill_prompts(std::span<LanguageModel* const> models,
                     std::span<const std::vector<int32_t>> prompts, DecodeMetrics& m);

/// The state the chain and tree engines share: every request's sequence and output, whether it
/// is finished, the metrics of docs/verifiers.md "Metrics", and the models' counters at the start.
class SpeculativeRun {
 public:
  /// Reads the token budget and the resume point (DecodeConfig::generated) of `config`.
  SpeculativeRun(LanguageModel& target, LanguageModel& draft,
                 std::span<const std::vector<int32_t>> prompts, const DecodeConfig& config,
                 int64_t depth);

  /// The unfinished requests, in order.
  std::vector<int64_t> active() const;
  int64_t tokens_left(int64_t b) const;
  /// The output position of request b's next token: tokens generated before the run and in it.
  int64_t output_position(int64_t b) const;
  /// Request b's prompt and accepted tokens (the engine may extend it with drafts while drafting).
  std::vector<int32_t>& sequence(int64_t b) { return sequences_[b]; }
  DecodeMetrics& metrics() { return result_.metrics; }

  /// Records request b's verified step: `drafted` positions offered, `n` accepted, `betas` the
  /// Σ min(p, q) of the tested positions (min(n + 1, drafted) of them), and appends
  /// emitted[0..n] (cut after EOS) to its sequence, which must hold only the verified prefix.
  /// Rolls both models back to the verified prefix plus the first `models_hold` ≤ n accepted
  /// tokens, the ones every model has scored right after it (a chain step: n; a tree step, whose
  /// models last saw some other branch: 0) — never to the new length, whose last token the models
  /// hold only as the rejected draft, if at all.
  void commit(int64_t b, int64_t drafted, int64_t n, std::span<const double> betas,
              bool residual_fallback, std::span<const int32_t> emitted, int64_t models_hold);

  /// Releases the requests' model state and fills in model counters and decode time.
  DecodeResult finish();

  /// Time spent on metrics no serving engine computes (the match verifiers' acceptance
  /// probabilities, DecodeMetrics::record_match_position): left out of decode_seconds and of
  /// every request's decoding time.
  void add_metric_seconds(double seconds) { metric_seconds_ += seconds; }

 private:
  LanguageModel& target_;
  LanguageModel& draft_;
  int64_t max_new_tokens_;
  std::vector<int64_t> generated_before_;
  std::vector<std::vector<int32_t>> sequences_;
  std::vector<uint8_t> finished_;
  DecodeResult result_;
  ModelStats target_before_, draft_before_;
  double start_ = 0.0;  ///< the decode clock's start, after the prompt pass
  double metric_seconds_ = 0.0;
};

}  // namespace speclab::detail
