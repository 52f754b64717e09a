// A synthetic draft for benchmarking at a chosen acceptance rate (docs/verifiers.md "Synthetic
// drafts"): `synthetic:RATE` or `synthetic:R1,R2,...` (one rate per draft position, the last one
// repeated) drafts from a row q built from the target's own row p at the same context so that
// Σ min(p, q) = RATE exactly. The draft is a real distribution that the verifier checks as any
// other, so decoding stays lossless; only the acceptance is dialled.
#pragma once

#include <algorithm>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "core/models/model.hpp"

namespace speclab {

/// The draft row of rate `rate` for the target row p (any ordered field: double, or exact
/// rationals in the tests): q = λ·p + (1 − λ)·e_m, with m the least probable token of p (lowest id
/// on ties) and λ = (rate − p_m)/(1 − p_m) clamped to [0, 1]. For x ≠ m, q_x = λ·p_x ≤ p_x; at m,
/// q_m = p_m + (1 − λ)(1 − p_m) ≥ p_m; so Σ min(p, q) = λ(1 − p_m) + p_m = rate whenever
/// p_m ≤ rate ≤ 1 (always when rate ≥ 1/V, since p_m ≤ 1/V). For rate < p_m, q = e_m and
/// Σ min(p, q) = p_m, the least that any draft can reach against p. `p` and `q` have V ≥ 1
/// entries; p sums to 1.
template <class T>
void synthetic_draft_row(std::span<const T> p, const T& rate, std::span<T> q) {
  const size_t m = static_cast<size_t>(std::min_element(p.begin(), p.end()) - p.begin());
  const T least = p[m];
  T lambda = 1;
  if (least < 1) {
    lambda = (rate - least) / (1 - least);
    if (lambda < 0) lambda = 0;
    if (lambda > 1) lambda = 1;
  }
  for (size_t x = 0; x < p.size(); ++x) q[x] = lambda * p[x];
  q[m] += 1 - lambda;
}

/// True for a name of the form `synthetic:...`.
bool is_synthetic_draft(std::string_view name);

/// The rates of `synthetic:R1[,R2,...]`, each in [0, 1]. Throws InvalidInput quoting the name and
/// the bad item.
std::vector<double> parse_synthetic_rates(std::string_view name);

/// The draft `synthetic:RATES` for a target: it holds its own instance of the target model, scores
/// it at the draft's context with the target's sampling pipeline (so a draft step costs at least
/// one target step) and returns q of synthetic_draft_row as logits T·ln q, which the draft's
/// pipeline (a plain temperature T > 0) turns back into q. Draft position i of a step (counted from
/// the first call after a truncate) uses rate R_min(i, n).
class SyntheticDraft : public LanguageModel {
 public:
  /// Throws InvalidInput when the draft pipeline is not a plain temperature > 0 (top-k, top-p or
  /// min-p would cut q, greedy would make it one-hot, and the rate would not be RATE).
  SyntheticDraft(std::string name, std::unique_ptr<LanguageModel> target, std::vector<double> rates,
                 const SamplingParams& target_sampling, const SamplingParams& draft_sampling);

  int64_t vocab() const override { return target_->vocab(); }
  std::string name() const override { return name_; }
  int32_t eos_token() const override { return target_->eos_token(); }
  void truncate(int64_t sequence_id, int64_t length) override;
  void release(int64_t sequence_id) override;
  /// The rate of draft position i (1-based).
  double rate_at(int64_t position) const;

 protected:
  void score_logits(std::span<const ScoreRequest> requests, std::span<float> logits) override;
  /// The prompt pass of the target instance it scores with.
  int64_t prefill_state(std::span<const ScoreRequest> requests) override {
    return target_->prefill(requests);
  }

 private:
  std::string name_;
  std::unique_ptr<LanguageModel> target_;
  std::vector<double> rates_;
  SamplingParams target_sampling_;
  double temperature_;
  /// Per sequence: its length at the first draft call after the last truncate (position 1).
  std::unordered_map<int64_t, int64_t> step_start_;
};

/// make_model for drafts: `synthetic:RATES` builds a SyntheticDraft over a fresh instance of
/// `target_model`, any other name make_model(name).
std::unique_ptr<LanguageModel> make_draft_model(std::string_view name,
                                                std::string_view target_model,
                                                const SamplingParams& target_sampling,
                                                const SamplingParams& draft_sampling);

}  // namespace speclab
