// The synthetic draft of a chosen acceptance rate; see synthetic_draft.hpp.
#include "core/models/synthetic_draft.hpp"

#include <fmt/format.h>

#include <charconv>
#include <cmath>
#include <limits>

#include "core/base/error.hpp"
#include "core/models/model_registry.hpp"

namespace speclab {
namespace {

constexpr std::string_view kPrefix = "synthetic:";

}  // namespace

bool is_synthetic_draft(std::string_view name) { return name.starts_with(kPrefix); }

std::vector<double> parse_synthetic_rates(std::string_view name) {
  if (!is_synthetic_draft(name)) {
    throw InvalidInput(fmt::format("draft '{}' is not of the form synthetic:RATE[,RATE...]", name));
  }
  std::vector<double> rates;
  std::string_view rest = name.substr(kPrefix.size());
  for (;;) {
    const size_t comma = rest.find(',');
    const std::string_view item = rest.substr(0, comma);
    double rate = 0.0;
    const auto [ptr, error] = std::from_chars(item.data(), item.data() + item.size(), rate);
    if (item.empty() || error != std::errc{} || ptr != item.data() + item.size() ||
        !std::isfinite(rate) || rate < 0.0 || rate > 1.0) {
      throw InvalidInput(fmt::format(
          "draft '{}': rate '{}' (item {}) is not a number in [0, 1]; expected "
          "synthetic:RATE or synthetic:R1,R2,... (one acceptance rate per draft position)",
          name, item, rates.size() + 1));
    }
    rates.push_back(rate);
    if (comma == std::string_view::npos) break;
    rest = rest.substr(comma + 1);
  }
  return rates;
}

SyntheticDraft::SyntheticDraft(std::string name, std::unique_ptr<LanguageModel> target,
                               std::vector<double> rates, const SamplingParams& target_sampling,
                               const SamplingParams& draft_sampling)
    : name_(std::move(name)),
      target_(std::move(target)),
      rates_(std::move(rates)),
      target_sampling_(target_sampling),
      temperature_(draft_sampling.temperature) {
  if (rates_.empty()) throw InvalidInput(fmt::format("draft '{}' has no rate", name_));
  const bool cuts =
      draft_sampling.top_k != 0 || draft_sampling.top_p != 1.0 || draft_sampling.min_p != 0.0;
  if (!(draft_sampling.temperature > 0.0) || !std::isfinite(draft_sampling.temperature) || cuts) {
    throw InvalidInput(fmt::format(
        "draft '{}' needs the draft's sampling to be a plain temperature > 0 (got temperature {}, "
        "top_k {}, top_p {}, min_p {}): greedy drafting or a top-k/top-p/min-p cut would change "
        "the constructed row q and its rate",
        name_, draft_sampling.temperature, draft_sampling.top_k, draft_sampling.top_p,
        draft_sampling.min_p));
  }
}

double SyntheticDraft::rate_at(int64_t position) const {
  const int64_t i = std::clamp<int64_t>(position, 1, static_cast<int64_t>(rates_.size()));
  return rates_[static_cast<size_t>(i - 1)];
}

void SyntheticDraft::truncate(int64_t sequence_id, int64_t length) {
  step_start_.erase(sequence_id);
  target_->truncate(sequence_id, length);
}

void SyntheticDraft::release(int64_t sequence_id) {
  step_start_.erase(sequence_id);
  target_->release(sequence_id);
}

void SyntheticDraft::score_logits(std::span<const ScoreRequest> requests, std::span<float> logits) {
  const int64_t v = vocab();
  const std::vector<float> p = target_->score(requests, target_sampling_);
  std::vector<double> p_row(v), q_row(v);
  int64_t out = 0;
  for (const ScoreRequest& r : requests) {
    const int64_t length = static_cast<int64_t>(r.tokens.size());
    const int64_t first_prefix = length - r.n_positions + 1;
    const int64_t start = step_start_.try_emplace(r.sequence_id, first_prefix).first->second;
    for (int64_t j = 0; j < r.n_positions; ++j, ++out) {
      for (int64_t x = 0; x < v; ++x) p_row[x] = p[out * v + x];
      const double rate = rate_at(first_prefix + j - start + 1);
      synthetic_draft_row<double>(p_row, rate, q_row);
      for (int64_t x = 0; x < v; ++x) {
        logits[out * v + x] = q_row[x] > 0.0 ? static_cast<float>(temperature_ * std::log(q_row[x]))
                                             : -std::numeric_limits<float>::infinity();
      }
    }
  }
}

std::unique_ptr<LanguageModel> make_draft_model(std::string_view name,
                                                std::string_view target_model,
                                                const SamplingParams& target_sampling,
                                                const SamplingParams& draft_sampling) {
  if (!is_synthetic_draft(name)) return make_model(name);
  std::vector<double> rates = parse_synthetic_rates(name);
  return std::make_unique<SyntheticDraft>(std::string(name), make_model(target_model),
                                          std::move(rates), target_sampling, draft_sampling);
}

}  // namespace speclab
