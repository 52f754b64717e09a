// Internals shared by the chain and tree decoding engines (core/decode*.cpp).
#pragma once

#include <span>
#include <vector>

#include "core/decode.hpp"

namespace speclab::detail {

double now_seconds();
/// Prompts, token budget, γ, sampling parameters (throws InvalidInput naming what is wrong).
void validate_config(const DecodeConfig& config, std::span<const std::vector<int32_t>> prompts,
                     int64_t vocab, bool speculative);
void check_same_vocabulary(const LanguageModel& target, const LanguageModel& draft);
/// β = Σ_x min(p(x), q(x)) over V tokens.
double overlap(const float* p, const float* q, int64_t v);
/// Appends tokens, stopping after EOS (sets finished); returns how many were appended.
int64_t append_until_eos(std::vector<int32_t>& out, std::span<const int32_t> tokens, int32_t eos,
                         bool& finished);
/// Work done between two snapshots of a model's counters.
ModelStats stats_since(ModelStats after, const ModelStats& before);

}  // namespace speclab::detail
