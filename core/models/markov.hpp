// A table model: the next-token distribution depends on the last `order` tokens through an explicit
// table. Tiny instances have exactly known joint distributions, which makes this the model of
// the exact (core/exact) and statistical checks of the decoding engines.
#pragma once

#include <string>
#include <vector>

#include "core/models/model.hpp"

namespace speclab {

class MarkovModel : public LanguageModel {
 public:
  /// `table` has V^order rows of V probabilities: row index = Σ_j x_{L-order+j} V^(order-1-j)
  /// (the last `order` tokens, oldest first, as base-V digits). order ≥ 1. Sequences shorter than
  /// `order` are left-padded with token 0. Rows must be distributions (validated).
  MarkovModel(std::string name, int64_t vocab, int64_t order, std::vector<double> table,
              int32_t eos_token = -1);

  int64_t vocab() const override { return vocab_; }
  std::string name() const override { return name_; }
  int32_t eos_token() const override { return eos_; }
  int64_t order() const { return order_; }
  /// The distribution after a context (the last `order` tokens count).
  std::span<const double> row(std::span<const int32_t> context) const;

 protected:
  void score_logits(std::span<const ScoreRequest> requests, std::span<float> logits) override;

 private:
  std::string name_;
  int64_t vocab_, order_;
  std::vector<double> table_;
  int32_t eos_;
};

}  // namespace speclab
