// The sampling pipeline and row validation (SPEC.md "Sampling pipeline", "Bad input").
#include "core/sampling.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

#include "core/error.hpp"
#include "core/rules.hpp"

namespace speclab {

void validate_sampling_params(const SamplingParams& params) {
  if (!std::isfinite(params.temperature) || params.temperature < 0.0) {
    throw InvalidInput(
        fmt::format("sampling.temperature is {}; expected a finite value ≥ 0", params.temperature));
  }
  if (params.top_k < 0) {
    throw InvalidInput(
        fmt::format("sampling.top_k is {}; expected ≥ 0 (0 turns top-k off)", params.top_k));
  }
  if (!(params.top_p > 0.0 && params.top_p <= 1.0)) {
    throw InvalidInput(fmt::format(
        "sampling.top_p is {}; expected 0 < top_p ≤ 1 (1 turns top-p off)", params.top_p));
  }
  if (!(params.min_p >= 0.0 && params.min_p <= 1.0)) {
    throw InvalidInput(fmt::format(
        "sampling.min_p is {}; expected 0 ≤ min_p ≤ 1 (0 turns min-p off)", params.min_p));
  }
}

int32_t argmax_lowest(std::span<const float> row) {
  int32_t best = 0;
  for (size_t i = 1; i < row.size(); ++i) {
    if (row[i] > row[best]) best = static_cast<int32_t>(i);
  }
  return best;
}

void probs_from_logits(std::span<const float> logits, const SamplingParams& params,
                       std::span<float> probs) {
  validate_sampling_params(params);
  const size_t vocab = logits.size();
  if (vocab == 0) throw InvalidInput("logits is empty; expected a row of V ≥ 1 values");
  if (probs.size() != vocab) {
    throw InvalidInput(
        fmt::format("probs has {} entries; expected {} (one per logit)", probs.size(), vocab));
  }
  bool any_finite = false;
  for (size_t i = 0; i < vocab; ++i) {
    const float x = logits[i];
    if (std::isnan(x) || x == std::numeric_limits<float>::infinity()) {
      throw InvalidInput(
          fmt::format("logits token {} is {}; expected a finite value or -inf (masked)", i, x));
    }
    any_finite = any_finite || std::isfinite(x);
  }
  if (!any_finite) throw InvalidInput("logits are all -inf; at least one token must be possible");

  if (params.temperature == 0.0) {
    std::fill(probs.begin(), probs.end(), 0.0f);
    probs[argmax_lowest(logits)] = 1.0f;
    return;
  }

  // Tempered distribution, in double.
  const double max_logit = logits[argmax_lowest(logits)];
  std::vector<double> tempered(vocab);
  double total = 0.0;
  for (size_t i = 0; i < vocab; ++i) {
    const double z = (static_cast<double>(logits[i]) - max_logit) / params.temperature;
    tempered[i] = std::isfinite(z) ? std::exp(z) : 0.0;
    total += tempered[i];
  }
  for (double& t : tempered) t /= total;

  std::vector<uint8_t> keep(vocab, 1);
  for (size_t i = 0; i < vocab; ++i) keep[i] = tempered[i] > 0.0;
  const bool use_top_k = params.top_k > 0 && static_cast<size_t>(params.top_k) < vocab;
  if (use_top_k || params.top_p < 1.0) {
    // Most probable first; the lower id first among equals, so boundaries are deterministic.
    std::vector<int32_t> order(vocab);
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(),
                     [&](int32_t a, int32_t b) { return tempered[a] > tempered[b]; });
    const size_t k = use_top_k ? static_cast<size_t>(params.top_k) : vocab;
    for (size_t r = k; r < vocab; ++r) keep[order[r]] = 0;
    if (params.top_p < 1.0) {
      double survivor_mass = 0.0;
      for (size_t r = 0; r < k; ++r) survivor_mass += tempered[order[r]];
      double cumulative = 0.0;
      size_t r = 0;
      for (; r < k; ++r) {
        cumulative += tempered[order[r]];
        if (cumulative >= params.top_p * survivor_mass) break;
      }
      for (size_t s = r + 1; s < k; ++s) keep[order[s]] = 0;
    }
  }
  if (params.min_p > 0.0) {
    const double threshold = params.min_p * tempered[argmax_lowest(logits)];
    for (size_t i = 0; i < vocab; ++i) {
      if (tempered[i] < threshold) keep[i] = 0;
    }
  }

  double kept = 0.0;
  for (size_t i = 0; i < vocab; ++i) kept += keep[i] ? tempered[i] : 0.0;
  for (size_t i = 0; i < vocab; ++i) {
    probs[i] = keep[i] ? static_cast<float>(tempered[i] / kept) : 0.0f;
  }
}

std::vector<float> probs_from_logits(std::span<const float> logits, const SamplingParams& params) {
  std::vector<float> probs(logits.size());
  probs_from_logits(logits, params, probs);
  return probs;
}

namespace {
std::string describe(const RowLocation& where) {
  return fmt::format("{} row {} (request {}, position {})", where.argument, where.row,
                     where.request, where.position);
}
}  // namespace

void validate_probability_value(float value, int64_t token, const RowLocation& where) {
  if (!std::isfinite(value) || value < 0.0f || value > 1.0f + kProbSumTolerance) {
    throw InvalidInput(
        fmt::format("{}: token {} has probability {}; expected a finite value in [0, 1]",
                    describe(where), token, value));
  }
}

void validate_probability_row(std::span<const float> row, const RowLocation& where) {
  double sum = 0.0;
  for (size_t i = 0; i < row.size(); ++i) {
    const float x = row[i];
    if (!std::isfinite(x) || x < 0.0f) {
      throw InvalidInput(
          fmt::format("{}: token {} has probability {}; probabilities must be finite and ≥ 0",
                      describe(where), i, x));
    }
    sum += x;
  }
  if (std::abs(sum - 1.0) > kProbSumTolerance) {
    throw InvalidInput(fmt::format("{} sums to {:.6g}; expected 1 ± {:g}", describe(where), sum,
                                   kProbSumTolerance));
  }
}

int32_t sample_categorical(std::span<const float> weights, uint32_t bits) {
  uint64_t total = 0;
  for (float w : weights) total += to_fixed(w);
  if (total == 0) {
    throw InvalidInput(fmt::format(
        "sample_categorical: all {} weights are zero; expected a positive total", weights.size()));
  }
  const uint64_t target = fixed_target(bits, total);
  uint64_t cumulative = 0;
  for (size_t i = 0; i < weights.size(); ++i) {
    cumulative += to_fixed(weights[i]);
    if (cumulative > target) return static_cast<int32_t>(i);
  }
  return static_cast<int32_t>(weights.size()) - 1;  // unreachable: target < total
}

}  // namespace speclab
