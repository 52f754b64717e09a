// The language-model interface (see model.hpp): validation, the sampling pipeline and counters.
#include "core/models/model.hpp"

#include <fmt/format.h>

#include <chrono>

#include "core/base/error.hpp"

namespace speclab {

int64_t total_positions(std::span<const ScoreRequest> requests) {
  int64_t total = 0;
  for (const auto& r : requests) total += r.n_positions;
  return total;
}

namespace {

void check_tokens(const LanguageModel& model, std::span<const ScoreRequest> requests) {
  const int64_t v = model.vocab();
  for (size_t s = 0; s < requests.size(); ++s) {
    const auto& r = requests[s];
    for (size_t i = 0; i < r.tokens.size(); ++i) {
      if (r.tokens[i] < 0 || r.tokens[i] >= v) {
        throw InvalidInput(
            fmt::format("{}: request {} token {} is {}; expected a token id in [0, {})",
                        model.name(), s, i, r.tokens[i], v));
      }
    }
  }
}

}  // namespace

int64_t LanguageModel::prefill(std::span<const ScoreRequest> requests) {
  check_tokens(*this, requests);
  return prefill_state(requests);
}

void LanguageModel::score(std::span<const ScoreRequest> requests, const SamplingParams& sampling,
                          std::span<float> probs) {
  validate_sampling_params(sampling);
  const int64_t v = vocab();
  for (size_t s = 0; s < requests.size(); ++s) {
    const auto& r = requests[s];
    if (r.n_positions < 1 || r.n_positions > static_cast<int64_t>(r.tokens.size())) {
      throw InvalidInput(fmt::format(
          "{}: request {} asks for m = {} positions of a sequence of {} tokens; expected "
          "1 ≤ m ≤ length",
          name(), s, r.n_positions, r.tokens.size()));
    }
  }
  check_tokens(*this, requests);
  const int64_t rows = total_positions(requests);
  if (static_cast<int64_t>(probs.size()) != rows * v) {
    throw InvalidInput(fmt::format("{}: probs has {} values; expected Σm·V = {}·{} = {}", name(),
                                   probs.size(), rows, v, rows * v));
  }
  const auto start = std::chrono::steady_clock::now();
  score_logits(requests, probs);
  std::vector<float> row(v);
  for (int64_t j = 0; j < rows; ++j) {
    std::span<float> out = probs.subspan(j * v, v);
    std::copy(out.begin(), out.end(), row.begin());
    probs_from_logits(row, sampling, out);
  }
  stats_.calls += 1;
  stats_.sequences += static_cast<int64_t>(requests.size());
  stats_.positions += rows;
  stats_.seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

std::vector<float> LanguageModel::score(std::span<const ScoreRequest> requests,
                                        const SamplingParams& sampling) {
  std::vector<float> probs(total_positions(requests) * vocab());
  score(requests, sampling, probs);
  return probs;
}

}  // namespace speclab
