// core/models/linear_softmax and its skinny product: determinism, the score() contract (m rows =
// m prefix calls, batch = each alone), the kernel against a double reference, the rank family
// (rank d = target, α rising with rank), presets and their TOML mirror, and error messages.
#include "core/models/linear_softmax.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <sstream>

#include "core/base/error.hpp"
#include "core/models/skinny_gemm.hpp"
#include "tests/support/error_of.hpp"

namespace speclab {
namespace {

using ::testing::HasSubstr;

using testing::error_of;

std::vector<int32_t> random_tokens(int64_t n, int64_t vocab, uint64_t seed) {
  std::vector<int32_t> tokens(n);
  uint64_t s = seed;
  for (auto& t : tokens) {
    s = s * 6364136223846793005ULL + 1442695040888963407ULL;
    t = static_cast<int32_t>((s >> 33) % static_cast<uint64_t>(vocab));
  }
  return tokens;
}

std::vector<float> score_one(LanguageModel& model, std::span<const int32_t> tokens, int64_t m) {
  const ScoreRequest request{.tokens = tokens, .n_positions = m};
  return model.score(std::span(&request, 1), {});
}

// α = mean over contexts of Σ_t min(p(t), q(t)) at T = 1 (docs/verifiers.md V1).
double mean_acceptance(LanguageModel& target, LanguageModel& draft, int64_t n_contexts,
                       uint64_t seed) {
  const int64_t v = target.vocab(), length = 6;
  const auto tokens = random_tokens(n_contexts * length, v, seed);
  std::vector<ScoreRequest> requests;
  for (int64_t i = 0; i < n_contexts; ++i) {
    requests.push_back({.tokens = std::span(tokens).subspan(i * length, length)});
  }
  const auto p = target.score(requests, {});
  const auto q = draft.score(requests, {});
  double alpha = 0.0;
  for (int64_t i = 0; i < v * n_contexts; ++i) alpha += std::min(p[i], q[i]);
  return alpha / static_cast<double>(n_contexts);
}

LinearSoftmaxConfig small_config(uint64_t seed = 5) {
  return {.family = "test",
          .vocab = 1000,
          .hidden = 48,
          .context = 3,
          .context_decay = 0.7,
          .sigma_decay = 1.0,
          .logit_scale = 6.0,
          .zipf = 1.0,
          .seed = seed};
}

TEST(LinearSoftmax, SameSeedGivesSameLogits) {
  auto a = LinearSoftmaxFamily::create(small_config())->make_target();
  auto b = LinearSoftmaxFamily::create(small_config())->make_target();
  auto c = LinearSoftmaxFamily::create(small_config(6))->make_target();
  const auto tokens = random_tokens(9, 1000, 1);
  EXPECT_EQ(score_one(*a, tokens, 4), score_one(*b, tokens, 4));
  EXPECT_NE(score_one(*a, tokens, 4), score_one(*c, tokens, 4));
}

TEST(LinearSoftmax, PositionRowsEqualSeparatePrefixCalls) {
  // m = 17 and 20 span three of the kernel's 8-column tiles. Bitwise: each logit is one FMA chain.
  auto model = LinearSoftmaxFamily::create(small_config())->make_target();
  const auto tokens = random_tokens(24, 1000, 2);
  const int64_t v = model->vocab();
  for (int64_t m : {1, 2, 5, 16, 17, 20}) {
    const auto rows = score_one(*model, tokens, m);
    for (int64_t j = 0; j < m; ++j) {
      const auto prefix = std::span(tokens).first(tokens.size() - m + 1 + j);
      const auto alone = score_one(*model, prefix, 1);
      ASSERT_TRUE(std::equal(alone.begin(), alone.end(), rows.begin() + j * v))
          << "m = " << m << ", row " << j;
    }
  }
}

TEST(LinearSoftmax, BatchEqualsEachSequenceAlone) {
  auto model = make_linear_softmax_model("lsm-tiny-draft");
  const auto tokens = random_tokens(40, model->vocab(), 3);
  const std::vector<ScoreRequest> requests = {
      {.tokens = std::span(tokens).first(7), .n_positions = 3, .sequence_id = 0},
      {.tokens = std::span(tokens).subspan(7, 1), .n_positions = 1, .sequence_id = 1},
      {.tokens = std::span(tokens).subspan(8, 20), .n_positions = 11, .sequence_id = 2},
      {.tokens = std::span(tokens).subspan(28, 12), .n_positions = 5, .sequence_id = 3}};
  const auto batch = model->score(requests, {});
  std::vector<float> each;
  for (const auto& r : requests) {
    const auto rows = model->score(std::span(&r, 1), {});
    each.insert(each.end(), rows.begin(), rows.end());
  }
  EXPECT_EQ(batch, each);
  EXPECT_EQ(model->stats().positions, 2 * (3 + 1 + 11 + 5));
}

TEST(LinearSoftmax, SkinnyGemmMatchesDoubleReference) {
  for (int64_t rows : {1, 17, 45}) {
    for (int64_t depth : {1, 13, 70}) {
      PanelMatrix a(rows, depth);
      const auto values = random_tokens(rows * depth + 40 * (depth + 3) + rows, 2001, rows + depth);
      auto value = [&](int64_t i) { return static_cast<float>(values[i] - 1000) / 1000.0f; };
      for (int64_t i = 0; i < rows; ++i) {
        for (int64_t k = 0; k < depth; ++k) a.at(i, k) = value(i * depth + k);
      }
      const int64_t ldx = depth + 3, ldo = rows + 2;
      std::vector<float> x(20 * ldx), bias(rows);
      for (size_t i = 0; i < x.size(); ++i) x[i] = value(rows * depth + i);
      for (int64_t i = 0; i < rows; ++i) bias[i] = value(rows * depth + 20 * ldx + i);
      for (int64_t m = 1; m <= 20; ++m) {
        for (bool with_bias : {false, true}) {
          std::vector<float> out(m * ldo, -7.0f);
          skinny_gemm(a, {.rows = rows, .depth = depth, .n_cols = m}, x, ldx,
                      with_bias ? std::span<const float>(bias) : std::span<const float>(), out,
                      ldo);
          for (int64_t c = 0; c < m; ++c) {
            for (int64_t i = 0; i < rows; ++i) {
              double ref = with_bias ? bias[i] : 0.0, magnitude = std::abs(ref);
              for (int64_t k = 0; k < depth; ++k) {
                ref += static_cast<double>(a.at(i, k)) * x[c * ldx + k];
                magnitude += std::abs(static_cast<double>(a.at(i, k)) * x[c * ldx + k]);
              }
              ASSERT_NEAR(out[c * ldo + i], ref, 1e-6 * magnitude + 1e-7)
                  << "rows " << rows << " depth " << depth << " m " << m << " col " << c << " row "
                  << i;
            }
            for (int64_t i = rows; i < ldo; ++i)
              ASSERT_EQ(out[c * ldo + i], -7.0f);  // padding kept
          }
        }
      }
    }
  }
}

TEST(LinearSoftmax, LeadingBlockGivesTheSameProductAsThePrefixOfTheFullMatrix) {
  const auto family = LinearSoftmaxFamily::create(small_config());
  const int64_t v = 1000, r = 20;
  const PanelMatrix block = family->g().leading_block(v, r);
  std::vector<float> z(3 * r, 0.25f), from_full(3 * v), from_block(3 * v);
  skinny_gemm(family->g(), {.rows = v, .depth = r, .n_cols = 3}, z, r, family->bias(), from_full,
              v);
  skinny_gemm(block, {.rows = v, .depth = r, .n_cols = 3}, z, r, family->bias(), from_block, v);
  EXPECT_EQ(from_full, from_block);
}

TEST(LinearSoftmax, FullRankDraftEqualsTarget) {
  const auto family = LinearSoftmaxFamily::create(small_config());
  auto target = family->make_target();
  auto draft = family->make_draft(family->config().hidden);
  const auto tokens = random_tokens(10, 1000, 4);
  EXPECT_EQ(score_one(*target, tokens, 6), score_one(*draft, tokens, 6));
  EXPECT_EQ(target->name(), "test-target");
  EXPECT_EQ(family->make_draft(8)->name(), "test-r8");
}

TEST(LinearSoftmax, AcceptanceRateIncreasesWithRank) {
  const auto family = LinearSoftmaxFamily::create(small_config());
  auto target = family->make_target();
  double previous = 0.0;
  for (int64_t rank : {1, 4, 12, 24, 48}) {
    auto draft = family->make_draft(rank);
    const double alpha = mean_acceptance(*target, *draft, 64, 11);
    EXPECT_GT(alpha, previous) << "rank " << rank;
    previous = alpha;
  }
  EXPECT_NEAR(previous, 1.0, 1e-5);  // rank d is the target
}

TEST(LinearSoftmax, DraftRankOutOfRangeIsRejected) {
  const auto family = LinearSoftmaxFamily::create(small_config());
  EXPECT_THAT(error_of([&] { family->make_draft(0); }),
              HasSubstr("draft rank is 0; expected 1 ≤ rank ≤ hidden = 48"));
  auto bad = small_config();
  bad.context_decay = 1.5;
  EXPECT_THAT(error_of([&] { LinearSoftmaxFamily::create(bad); }),
              HasSubstr("context_decay is 1.5; expected a value in (0, 1]"));
}

TEST(LinearSoftmax, UnknownPresetListsKnownNames) {
  const auto message = error_of([] { make_linear_softmax_model("lsm-huge"); });
  EXPECT_THAT(message, HasSubstr("unknown LinearSoftmax preset 'lsm-huge'"));
  for (const auto& p : linear_softmax_presets()) EXPECT_THAT(message, HasSubstr(p.name));
}

TEST(LinearSoftmax, TokenOutOfRangeIsRejected) {
  auto model = make_linear_softmax_model("lsm-tiny-target");
  const std::vector<int32_t> tokens = {3, 1, 16, 2};
  EXPECT_THAT(
      error_of([&] { score_one(*model, tokens, 2); }),
      HasSubstr("lsm-tiny-target: request 0 token 2 is 16; expected a token id in [0, 16)"));
}

TEST(LinearSoftmax, PresetsMatchDataFile) {
  const std::string path = std::string(SPECLAB_SOURCE_DIR) + "/data/models.toml";
  std::ifstream file(path);
  ASSERT_TRUE(file) << path;
  std::stringstream text;
  text << file.rdbuf();
  const auto from_file = linear_softmax_presets_from_toml(text.str(), path);
  const auto builtin = linear_softmax_presets();
  ASSERT_EQ(from_file.size(), builtin.size());
  for (const auto& p : builtin) {
    const auto it = std::find_if(from_file.begin(), from_file.end(),
                                 [&](const auto& q) { return q.name == p.name; });
    ASSERT_NE(it, from_file.end()) << p.name << " missing from " << path;
    EXPECT_EQ(*it, p) << p.name;
  }
}

TEST(LinearSoftmax, TomlErrorsSayWhere) {
  EXPECT_THAT(error_of([] { linear_softmax_presets_from_toml("[linear_softmax\n", "x.toml"); }),
              HasSubstr("x.toml:1:"));
  const std::string unknown_key =
      "[linear_softmax.families.f]\nvocab = 8\nhidden = 2\ncontext = 1\ncontext_decay = 1\n"
      "sigma_decay = 1\nlogit_scale = 1\nzipf = 1\nseed = 1\nspeed = 3\n"
      "[linear_softmax.models]\nm = { family = \"f\" }\n";
  EXPECT_THAT(error_of([&] { linear_softmax_presets_from_toml(unknown_key, "y.toml"); }),
              HasSubstr("y.toml:10:1: unknown key linear_softmax.families.f.speed"));
  const std::string bad_family =
      "[linear_softmax.families]\n[linear_softmax.models]\n"
      "m = { family = \"g\", rank = 2 }\n";
  EXPECT_THAT(error_of([&] { linear_softmax_presets_from_toml(bad_family, "z.toml"); }),
              HasSubstr("linear_softmax.models.m.family is 'g'"));
}

TEST(LinearSoftmax, HeadlinePairLoadsWithAlphaAtLeastThreeQuarters) {
  auto target = make_linear_softmax_model("lsm-target");
  auto draft = make_linear_softmax_model("lsm-draft");
  EXPECT_EQ(target->vocab(), 32000);
  EXPECT_GE(target->weight_bytes(), int64_t{128} << 20);
  EXPECT_LE(target->weight_bytes(), int64_t{256} << 20);
  EXPECT_LE(10 * draft->weight_bytes(), target->weight_bytes());
  EXPECT_EQ(&target->family(), &draft->family());  // one family in memory
  EXPECT_GE(mean_acceptance(*target, *draft, 32, 21), 0.75);
}

}  // namespace
}  // namespace speclab
