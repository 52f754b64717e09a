// The language-model interface of docs/architecture.md: one call scores a batch of sequences,
// returning for each, the next-token distributions at its last m positions (m = γ+1 is the target's
// verification pass, m = 1 a draft step), after the shared sampling pipeline (docs/verifiers.md).
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "core/sampling/sampling.hpp"

namespace speclab {

/// One sequence to score. Rows are produced for the prefixes tokens[0, L-m+1), ..., tokens[0, L)
/// where L = tokens.size(): row j is the distribution of the token that follows the first
/// L-m+1+j tokens. So for context c and drafts x_1..x_γ with m = γ+1, the rows are
/// p(·|c), p(·|c,x_1), ..., p(·|c,x_1..x_γ).
struct ScoreRequest {
  std::span<const int32_t> tokens;  ///< the whole sequence so far; length ≥ m ≥ 1
  int64_t n_positions = 1;          ///< m
  int64_t sequence_id = 0;          ///< stable id of the sequence (for stateful models)
};

/// Work a model has done since construction (or reset_stats()).
struct ModelStats {
  int64_t calls = 0;      ///< score() calls
  int64_t sequences = 0;  ///< sequences scored, summed over calls
  int64_t positions = 0;  ///< distribution rows produced
  double seconds = 0.0;   ///< wall time inside score()
};

class LanguageModel {
 public:
  virtual ~LanguageModel() = default;

  virtual int64_t vocab() const = 0;
  virtual std::string name() const = 0;
  /// Token that ends a sequence, or -1 when the model has none.
  virtual int32_t eos_token() const { return -1; }

  /// Scores a batch. `probs` has Σ m rows of V floats, in request order; every row has been
  /// through the sampling pipeline with `sampling`. Validates token ids and m; throws
  /// InvalidInput naming the request and position.
  void score(std::span<const ScoreRequest> requests, const SamplingParams& sampling,
             std::span<float> probs);
  std::vector<float> score(std::span<const ScoreRequest> requests, const SamplingParams& sampling);

  /// The prompt pass: builds whatever per-sequence state the model keeps (a KV cache) for each
  /// request's first L - 1 tokens, so that the first score() of a decode computes only the
  /// positions a decoding step computes (the last prompt token and the drafts). Outputs nothing
  /// and counts in neither stats() nor score()'s time; the engines time it as prefill. Validates
  /// token ids like score(). n_positions is ignored. Returns the positions it computed (0 for a
  /// model without per-sequence state).
  int64_t prefill(std::span<const ScoreRequest> requests);

  /// Forgets everything past the first `length` tokens of a sequence (the accepted prefix).
  /// Stateless models ignore it; stateful ones (a KV cache) must roll back. The engines promise
  /// that the first `length` tokens the model has seen for the sequence are the sequence's own,
  /// so a model may reuse their state without comparing tokens; what it sees after a truncate
  /// (drafts, the branches of a tree, all under one sequence id) may be replaced by the next
  /// call, so it must match those tokens against each request or recompute them.
  virtual void truncate(int64_t sequence_id, int64_t length) {
    (void)sequence_id;
    (void)length;
  }
  /// Frees any state held for a sequence.
  virtual void release(int64_t sequence_id) { (void)sequence_id; }

  const ModelStats& stats() const { return stats_; }
  void reset_stats() { stats_ = {}; }

 protected:
  /// Raw logits for the same rows as score(): Σ m rows of V floats. Inputs are already
  /// validated. A model whose natural output is probabilities returns their logarithms
  /// (-inf for zero).
  virtual void score_logits(std::span<const ScoreRequest> requests, std::span<float> logits) = 0;
  /// prefill()'s work on validated requests. A model without per-sequence state has nothing to
  /// prepare: every position it scores is computed when asked.
  virtual int64_t prefill_state(std::span<const ScoreRequest> requests) {
    (void)requests;
    return 0;
  }

 private:
  ModelStats stats_;
};

/// Σ m over the requests.
int64_t total_positions(std::span<const ScoreRequest> requests);

}  // namespace speclab
