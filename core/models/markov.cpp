// Table (Markov) model; see markov.hpp.
#include "core/models/markov.hpp"

#include <fmt/format.h>

#include <cmath>
#include <limits>

#include "core/base/error.hpp"

namespace speclab {

MarkovModel::MarkovModel(std::string name, int64_t vocab, int64_t order, std::vector<double> table,
                         int32_t eos_token)
    : name_(std::move(name)),
      vocab_(vocab),
      order_(order),
      table_(std::move(table)),
      eos_(eos_token) {
  if (vocab_ < 1 || order_ < 1) {
    throw InvalidInput(fmt::format("{}: vocab {} and order {} must be ≥ 1", name_, vocab_, order_));
  }
  int64_t rows = 1;
  for (int64_t k = 0; k < order_; ++k) rows *= vocab_;
  if (static_cast<int64_t>(table_.size()) != rows * vocab_) {
    throw InvalidInput(fmt::format("{}: table has {} values; expected V^order · V = {}", name_,
                                   table_.size(), rows * vocab_));
  }
  for (int64_t r = 0; r < rows; ++r) {
    double sum = 0.0;
    for (int64_t t = 0; t < vocab_; ++t) {
      const double x = table_[r * vocab_ + t];
      if (!std::isfinite(x) || x < 0.0) {
        throw InvalidInput(
            fmt::format("{}: table row {} token {} is {}; expected a probability", name_, r, t, x));
      }
      sum += x;
    }
    if (std::abs(sum - 1.0) > 1e-9) {
      throw InvalidInput(fmt::format("{}: table row {} sums to {}; expected 1", name_, r, sum));
    }
  }
  if (eos_ >= vocab_) {
    throw InvalidInput(fmt::format("{}: eos token {} is outside [0, {})", name_, eos_, vocab_));
  }
}

std::span<const double> MarkovModel::row(std::span<const int32_t> context) const {
  int64_t index = 0;
  const int64_t length = static_cast<int64_t>(context.size());
  for (int64_t j = 0; j < order_; ++j) {
    const int64_t pos = length - order_ + j;
    index = index * vocab_ + (pos >= 0 ? context[pos] : 0);
  }
  return std::span<const double>(table_).subspan(index * vocab_, vocab_);
}

void MarkovModel::score_logits(std::span<const ScoreRequest> requests, std::span<float> logits) {
  int64_t out = 0;
  for (const auto& r : requests) {
    const int64_t length = static_cast<int64_t>(r.tokens.size());
    for (int64_t j = 0; j < r.n_positions; ++j) {
      const auto p = row(r.tokens.first(length - r.n_positions + 1 + j));
      for (int64_t t = 0; t < vocab_; ++t) {
        logits[out * vocab_ + t] = p[t] > 0.0 ? static_cast<float>(std::log(p[t]))
                                              : -std::numeric_limits<float>::infinity();
      }
      ++out;
    }
  }
}

}  // namespace speclab
