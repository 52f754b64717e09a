// A LanguageModel that remembers the distribution of every prefix it has scored, for checks that
// decode the same short prompt thousands of times (`speclab verify`, statistical tests): a real
// model's row for a prefix is a function of the prefix, so each distinct prefix is computed once.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "core/models/model.hpp"

namespace speclab {

/// Wraps `inner`: a row is inner's distribution at temperature 1 without filters (returned as
/// log-probabilities, so this model's own sampling pipeline applies on top). Computes each
/// distinct prefix once, with inner's sequence 0, so inner holds state (a KV cache) for one
/// sequence however many this model is asked to score. Memory: V floats per distinct prefix.
class MemoModel : public LanguageModel {
 public:
  explicit MemoModel(LanguageModel& inner) : inner_(inner) {}

  int64_t vocab() const override { return inner_.vocab(); }
  std::string name() const override { return inner_.name() + " (memo)"; }
  int32_t eos_token() const override { return inner_.eos_token(); }
  /// Distinct prefixes computed so far.
  int64_t computed() const { return static_cast<int64_t>(rows_.size()); }

 protected:
  void score_logits(std::span<const ScoreRequest> requests, std::span<float> logits) override;

 private:
  const std::vector<float>& lookup(std::span<const int32_t> prefix);

  LanguageModel& inner_;
  std::map<std::vector<int32_t>, std::vector<float>> rows_;
};

}  // namespace speclab
