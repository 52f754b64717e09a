// A run's own timings as the planner's measured costs (core/plan/cost_model.hpp RoundCosts): what
// a plain step and a speculative round cost in a decode that was timed, so that every prediction
// of a speedup (`speclab run`'s predicted_speedup, `bench decode`, `plan --validate`) prices its
// rounds the same way.
#pragma once

#include <cstdint>

#include "core/decode/decode.hpp"
#include "core/models/model.hpp"
#include "core/plan/cost_model.hpp"

namespace speclab::experiments {

/// A speculative run's round at γ: its target's calls are its rounds (one verification call per
/// round), so drafting = draft seconds / rounds, verify_pass = target seconds / rounds and
/// overhead = (decode seconds − both models' seconds) / rounds. Throws InvalidInput for a run
/// without a verification call.
MeasuredRound measured_round(const ModelStats& target, const ModelStats& draft,
                             double decode_seconds, int64_t gamma);
MeasuredRound measured_round(const DecodeMetrics& speculative, int64_t gamma);

/// A plain run's step: decode seconds per target call (the engine's sampling included). Throws
/// InvalidInput for a run without one.
double measured_plain_step(const ModelStats& target, double decode_seconds);
double measured_plain_step(const DecodeMetrics& plain);

}  // namespace speclab::experiments
