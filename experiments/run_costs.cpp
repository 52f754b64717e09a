#include "experiments/run_costs.hpp"

#include <algorithm>

#include "core/base/error.hpp"

namespace speclab::experiments {

MeasuredRound measured_round(const ModelStats& target, const ModelStats& draft,
                             double decode_seconds, int64_t gamma) {
  if (target.calls < 1) throw InvalidInput("a speculative run without a verification call");
  const auto rounds = static_cast<double>(target.calls);
  // The clocks are read separately, so rounding can leave the outside time a hair below zero.
  const double outside = std::max(0.0, decode_seconds - target.seconds - draft.seconds);
  return {.gamma = gamma,
          .drafting = draft.seconds / rounds,
          .verify_pass = target.seconds / rounds,
          .overhead = outside / rounds};
}

MeasuredRound measured_round(const DecodeMetrics& speculative, int64_t gamma) {
  return measured_round(speculative.target, speculative.draft, speculative.decode_seconds, gamma);
}

double measured_plain_step(const ModelStats& target, double decode_seconds) {
  if (target.calls < 1) throw InvalidInput("a plain run without a target call");
  return decode_seconds / static_cast<double>(target.calls);
}

double measured_plain_step(const DecodeMetrics& plain) {
  return measured_plain_step(plain.target, plain.decode_seconds);
}

}  // namespace speclab::experiments
