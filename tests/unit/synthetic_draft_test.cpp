// The synthetic draft (core/models/synthetic_draft.hpp): its row has Σ min(p, q) equal to the
// rate exactly (checked in rational arithmetic on generated rows, with Σ min computed here from
// the definition), the model returns that row at each draft position, and bad names are refused.
#include "core/models/synthetic_draft.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>
#include <vector>

#include "core/base/error.hpp"
#include "core/exact/exact.hpp"
#include "core/models/model_registry.hpp"

namespace speclab {
namespace {

using exact::Q;

Q sum_min(const std::vector<Q>& p, const std::vector<Q>& q) {
  Q total = 0;
  for (size_t x = 0; x < p.size(); ++x) total += std::min(p[x], q[x]);
  return total;
}

TEST(SyntheticDraft, RowHasTheRateExactly) {
  // Every row of integer weights 0..3 over V = 1..4 (zeros and ties included), at rates on a grid
  // of [0, 1] and at the row's own least probability.
  for (int v = 1; v <= 4; ++v) {
    std::vector<int> w(v, 0);
    for (;;) {
      const int total = std::accumulate(w.begin(), w.end(), 0);
      if (total > 0) {
        std::vector<Q> p;
        for (int x : w) p.push_back(Q(x, total));
        const Q least = *std::min_element(p.begin(), p.end());
        std::vector<Q> rates{least};
        for (int i = 0; i <= 10; ++i) rates.push_back(Q(i, 10));
        for (const Q& rate : rates) {
          std::vector<Q> q(v);
          synthetic_draft_row<Q>(p, rate, q);
          Q mass = 0;
          for (const Q& value : q) {
            ASSERT_GE(value, 0);
            mass += value;
          }
          ASSERT_EQ(mass, 1);
          // Σ min(p, q) ≥ Σ_x q_x · min p = min p for every q (p_x ≥ min p, q_x ≤ 1): below min p
          // the row reaches exactly min p, otherwise exactly the rate.
          ASSERT_EQ(sum_min(p, q), std::max(rate, least))
              << "V " << v << " rate " << rate << " least " << least;
        }
      }
      int i = 0;
      while (i < v && ++w[i] == 4) w[i++] = 0;
      if (i == v) break;
    }
  }
}

TEST(SyntheticDraft, ModelRowsHaveTheirPositionsRate) {
  auto target = make_model("lsm-tiny-target");
  auto draft = make_draft_model("synthetic:0.9,0.4", "lsm-tiny-target", {}, {});
  const int64_t v = target->vocab();
  std::vector<int32_t> sequence{3, 7, 1};
  const double expected[] = {0.9, 0.4, 0.4};
  // Three draft calls of one step: positions 1, 2, 3 (the last rate repeated); a truncate starts
  // the next step at position 1 again.
  for (int round = 0; round < 2; ++round) {
    for (int i = 0; i < 3; ++i) {
      const ScoreRequest request{sequence, 1, 5};
      const std::vector<float> q = draft->score({&request, 1}, {});
      const std::vector<float> p = target->score({&request, 1}, {});
      double overlap = 0.0;
      for (int64_t x = 0; x < v; ++x) overlap += std::min<double>(p[x], q[x]);
      EXPECT_NEAR(overlap, expected[i], 1e-5) << "round " << round << " position " << i + 1;
      sequence.push_back(static_cast<int32_t>(i));
    }
    draft->truncate(5, static_cast<int64_t>(sequence.size()) - 2);
    sequence.resize(sequence.size() - 1);
  }
}

TEST(SyntheticDraft, DraftTemperatureGivesBackTheRow) {
  // At a draft temperature T the model returns T·ln q, which the pipeline divides by T again.
  const SamplingParams warm{.temperature = 0.5};
  auto target = make_model("lsm-tiny-target");
  auto draft = make_draft_model("synthetic:0.7", "lsm-tiny-target", {}, warm);
  const std::vector<int32_t> sequence{3, 7, 1};
  const ScoreRequest request{sequence, 1, 0};
  const std::vector<float> q = draft->score({&request, 1}, warm);
  const std::vector<float> p = target->score({&request, 1}, {});
  double overlap = 0.0;
  for (int64_t x = 0; x < target->vocab(); ++x) overlap += std::min<double>(p[x], q[x]);
  EXPECT_NEAR(overlap, 0.7, 1e-5);
}

TEST(SyntheticDraft, BadNamesAndPipelinesAreRefused) {
  for (const char* name : {"synthetic:", "synthetic:1.5", "synthetic:-0.1", "synthetic:0.5,",
                           "synthetic:half", "synthetic:nan"}) {
    EXPECT_THROW(parse_synthetic_rates(name), InvalidInput) << name;
  }
  EXPECT_EQ(parse_synthetic_rates("synthetic:0.8"), std::vector<double>{0.8});
  EXPECT_EQ(parse_synthetic_rates("synthetic:1,0.5,0"), (std::vector<double>{1.0, 0.5, 0.0}));
  EXPECT_THROW(make_draft_model("synthetic:0.8", "lsm-tiny-target", {}, {.temperature = 0.0}),
               InvalidInput);
  EXPECT_THROW(make_draft_model("synthetic:0.8", "lsm-tiny-target", {}, {.top_k = 4}),
               InvalidInput);
  EXPECT_THROW(make_draft_model("synthetic:0.8", "no-such-model", {}, {}), InvalidInput);
}

}  // namespace
}  // namespace speclab
