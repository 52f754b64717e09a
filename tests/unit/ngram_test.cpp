// core/models/ngram and core/models/prompt_lookup: interpolated Kneser–Ney byte models on the
// data/corpus/ English text, and the prompt-lookup draft.
#include "core/models/ngram.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <numeric>

#include "core/base/error.hpp"
#include "core/models/prompt_lookup.hpp"
#include "tests/support/error_of.hpp"

namespace speclab {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;

using testing::error_of;

std::vector<double> kn_row(const KneserNey& lm, std::span<const int32_t> context) {
  std::vector<double> p(kByteVocab);
  lm.distribution(context, p);
  return p;
}

std::vector<float> score_rows(LanguageModel& model, std::span<const int32_t> tokens, int64_t m) {
  const ScoreRequest request{tokens, m, 0};
  return model.score(std::span(&request, 1), SamplingParams{});
}

// Cross-entropy in bits per byte of predicting text[start, end) from everything before it.
double bits_per_byte(const KneserNey& lm, std::span<const int32_t> text, int64_t start,
                     int64_t end) {
  std::vector<double> p(kByteVocab);
  double bits = 0.0;
  for (int64_t i = start; i < end; ++i) {
    lm.distribution(text.first(i), p);
    bits -= std::log2(p[text[i]]);
  }
  return bits / static_cast<double>(end - start);
}

TEST(NGram, KneserNeyCountsMatchHandDerivation) {
  // "abracadabra", order 3.
  // Trigrams (raw, top order): abr bra rac aca cad ada dab abr bra -> abr 2, bra 2, the other
  // five 1; so n1 = 5, n2 = 2 and D3 = 5 / (5 + 2·2) = 5/9.
  // Bigram continuation counts N1+(• x y) = distinct bytes before "xy" = suffixes of the
  // distinct trigrams: br ra ac ca ad da ab, each once (the "ab" at byte 0 has no
  // predecessor; its other occurrence follows 'd'). Raw, "ab" "br" "ra" occur twice each.
  // n2 = 0 at order 2, so D2 falls back to 1/2.
  // Unigram continuation counts = suffixes of the distinct bigrams ab br ra ac ca ad da:
  // a 3 (after r, c, d), b 1, r 1, c 1, d 1 — raw counts would be a 5, b 2, r 2. n2 = 0: D1 = 1/2.
  const KneserNey lm("abracadabra", 3);
  EXPECT_EQ(lm.count("abr"), 2);
  EXPECT_EQ(lm.count("bra"), 2);
  EXPECT_EQ(lm.count("rac"), 1);
  EXPECT_EQ(lm.count("dab"), 1);
  EXPECT_EQ(lm.count("bar"), 0);
  for (const char* gram : {"ab", "br", "ra", "ac", "ca", "ad", "da"}) {
    EXPECT_EQ(lm.count(gram), 1) << gram;
  }
  EXPECT_EQ(lm.count("aa"), 0);
  EXPECT_EQ(lm.count("a"), 3);
  for (const char* gram : {"b", "r", "c", "d"}) EXPECT_EQ(lm.count(gram), 1) << gram;
  EXPECT_EQ(lm.count("z"), 0);
  EXPECT_DOUBLE_EQ(lm.discount(3), 5.0 / 9.0);
  EXPECT_DOUBLE_EQ(lm.discount(2), 0.5);
  EXPECT_DOUBLE_EQ(lm.discount(1), 0.5);

  // P1(a) = (3 - 1/2)/7 + (1/2)·5/7 · 1/256   (Σ continuation counts 7, 5 distinct bytes)
  // P2(a|r) = (1 - 1/2)/1 + (1/2)·1/1 · P1(a) (context r: one child, "ra")
  // P3(a|br) = (2 - 5/9)/2 + (5/9)·1/2 · P2(a|r)
  const double p1 = 2.5 / 7 + 0.5 * 5 / 7 / 256;
  const double p2 = 0.5 + 0.5 * p1;
  const double p3 = (2 - 5.0 / 9) / 2 + (5.0 / 9) / 2 * p2;
  const std::vector<int32_t> br = text_to_tokens("br");
  const auto row = kn_row(lm, br);
  EXPECT_NEAR(row['a'], p3, 1e-15);
  // An unseen byte after "br": only the back-off chain reaches it: (5/18)(1/2)(1/2)(5/7)/256.
  EXPECT_NEAR(row['z'], 5.0 / 18 * 0.5 * 0.5 * 5 / 7 / 256, 1e-18);
  EXPECT_NEAR(std::accumulate(row.begin(), row.end(), 0.0), 1.0, 1e-12);
  // An unseen context backs off to the lower orders: P(·|"zr") = P2(·|r).
  const auto zr = kn_row(lm, text_to_tokens("zr"));
  EXPECT_NEAR(zr['a'], p2, 1e-15);
}

// The same "abracadabra" as above over a 49152-token vocabulary, each letter mapped to an id that
// needs all 16 bits of a packed token (a → 49151, b → 256, r → 40000, c → 1, d → 0): counts and
// discounts are those derived above, and only the uniform base changes, from 1/256 to 1/49152.
TEST(NGram, TokenKneserNeyMatchesTheByteDerivationOverALargeVocabulary) {
  constexpr int64_t kVocab = 49152;
  const auto id = [](char c) -> int32_t {
    switch (c) {
      case 'a':
        return 49151;
      case 'b':
        return 256;
      case 'r':
        return 40000;
      case 'c':
        return 1;
      default:
        return 0;  // 'd'
    }
  };
  std::vector<int32_t> tokens;
  for (char c : std::string_view("abracadabra")) tokens.push_back(id(c));
  const KneserNey lm(tokens, 3, kVocab);
  EXPECT_EQ(lm.vocab(), kVocab);
  const auto ids = [&](std::string_view gram) {
    std::vector<int32_t> out;
    for (char c : gram) out.push_back(id(c));
    return out;
  };
  EXPECT_EQ(lm.count(ids("abr")), 2);
  EXPECT_EQ(lm.count(ids("rac")), 1);
  EXPECT_EQ(lm.count(ids("bar")), 0);
  EXPECT_EQ(lm.count(ids("a")), 3);
  EXPECT_DOUBLE_EQ(lm.discount(3), 5.0 / 9.0);

  const double p1 = 2.5 / 7 + 0.5 * 5 / 7 / kVocab;
  const double p2 = 0.5 + 0.5 * p1;
  const double p3 = (2 - 5.0 / 9) / 2 + (5.0 / 9) / 2 * p2;
  std::vector<double> row(kVocab);
  const double floor = lm.distribution(ids("br"), row);
  EXPECT_NEAR(row[id('a')], p3, 1e-15);
  // Token 12345 never occurs: it sits at the floor, the back-off chain times 1/V.
  EXPECT_NEAR(row[12345], 5.0 / 18 * 0.5 * 0.5 * 5 / 7 / kVocab, 1e-20);
  EXPECT_EQ(row[12345], floor);
  EXPECT_GT(row[id('c')], floor);  // c follows "a" in the text: above the floor
  EXPECT_NEAR(std::accumulate(row.begin(), row.end(), 0.0), 1.0, 1e-12);

  NGramModel model(std::make_shared<const KneserNey>(lm), "tokens");
  EXPECT_EQ(model.vocab(), kVocab);
  const std::vector<int32_t> context = ids("abr");
  const auto probs = score_rows(model, context, 1);
  ASSERT_EQ(probs.size(), static_cast<size_t>(kVocab));
  EXPECT_NEAR(probs[id('a')], p3, 1e-6);  // only the last two tokens, "br", matter
}

TEST(NGram, TokenKneserNeyRejectsBadInput) {
  const std::vector<int32_t> tokens = {1, 2, 3, 49151};
  EXPECT_THAT(error_of([&] { KneserNey(tokens, 5, 49152); }),
              AllOf(HasSubstr("order 5"), HasSubstr("[1, 4]"), HasSubstr("49152 tokens")));
  EXPECT_THAT(error_of([&] { KneserNey(tokens, 2, 49151); }),
              AllOf(HasSubstr("training token 3 is 49151"), HasSubstr("[0, 49151)")));
  EXPECT_THAT(error_of([&] { KneserNey(std::span(tokens).first(1), 2, 10); }),
              HasSubstr("1 tokens"));
  const KneserNey lm(tokens, 2, 49152);
  EXPECT_THAT(error_of([&] { lm.count("ab"); }), HasSubstr("not bytes"));
}

TEST(NGram, RowsAreDistributions) {
  const std::vector<int32_t> prompt = corpus_prompt(1000, 200);
  const std::vector<int32_t> odd = {0, 255, 7, 0, 0, 128};  // bytes the corpus never has
  for (const char* preset : {"ngram-5", "ngram-4", "ngram-2", "ngram-1"}) {
    auto model = make_ngram_model(preset);
    for (const auto* tokens : {&prompt, &odd}) {
      const int64_t m = static_cast<int64_t>(tokens->size());
      const auto probs = score_rows(*model, *tokens, m);
      for (int64_t j = 0; j < m; ++j) {
        double sum = 0.0;
        for (int64_t t = 0; t < kByteVocab; ++t) {
          const float p = probs[j * kByteVocab + t];
          ASSERT_GT(p, 0.0f) << preset << " row " << j << " token " << t;
          sum += p;
        }
        ASSERT_NEAR(sum, 1.0, 1e-5) << preset << " row " << j;
      }
    }
    // The double-precision rows are distributions to rounding.
    const auto& lm = static_cast<const NGramModel&>(*model).kneser_ney();
    const auto row = kn_row(lm, std::span(prompt).first(57));
    EXPECT_NEAR(std::accumulate(row.begin(), row.end(), 0.0), 1.0, 1e-12) << preset;
  }
}

TEST(NGram, HigherOrderHasLowerHeldOutCrossEntropy) {
  // Predict 20 000 held-out bytes (after 64 bytes of context) with orders 1..5.
  const std::vector<int32_t> text = corpus_prompt(0, 20064);
  double previous = 8.0;
  for (int order = 1; order <= 5; ++order) {
    const double bits = bits_per_byte(*trained_kneser_ney(order), text, 64, 20064);
    std::printf("[ NGram    ] order %d: %.3f bits/byte on held-out text\n", order, bits);
    EXPECT_LT(bits, previous) << "order " << order;
    previous = bits;
  }
  EXPECT_LT(previous, 3.0);  // order 5
}

TEST(NGram, ScoreOfMPositionsEqualsSeparateCalls) {
  auto model = make_ngram_model("ngram-5");
  const std::vector<int32_t> tokens = corpus_prompt(5000, 40);
  const int64_t m = 6;
  const auto all = score_rows(*model, tokens, m);
  for (int64_t j = 0; j < m; ++j) {
    const auto prefix = std::span(tokens).first(tokens.size() - m + 1 + j);
    const auto one = score_rows(*model, prefix, 1);
    for (int64_t t = 0; t < kByteVocab; ++t) {
      ASSERT_EQ(all[j * kByteVocab + t], one[t]) << "row " << j << " token " << t;
    }
  }
  EXPECT_EQ(model->stats().calls, 1 + m);
  EXPECT_EQ(model->stats().positions, 2 * m);
}

TEST(NGram, AcceptanceRateFallsWithDraftOrder) {
  // α = E_context Σ_x min(p_target(x), p_draft(x)) at T = 1 over 2000 held-out contexts.
  const std::vector<int32_t> text = corpus_prompt(30000, 2064);
  auto target = make_ngram_model("ngram-5");
  double alpha[3] = {0, 0, 0};
  const char* drafts[3] = {"ngram-2", "ngram-1", "ngram-5"};
  const auto p = score_rows(*target, text, 2000);
  for (int d = 0; d < 3; ++d) {
    auto draft = make_ngram_model(drafts[d]);
    const auto q = score_rows(*draft, text, 2000);
    double total = 0.0;
    for (size_t i = 0; i < p.size(); ++i) total += std::min(p[i], q[i]);
    alpha[d] = total / 2000;
    std::printf("[ NGram    ] alpha(ngram-5 vs %s) = %.4f\n", drafts[d], alpha[d]);
  }
  EXPECT_GT(alpha[0], alpha[1]);
  EXPECT_GT(alpha[1], 0.1);
  EXPECT_LT(alpha[0], 0.95);
  EXPECT_NEAR(alpha[2], 1.0, 1e-4);
}

TEST(NGram, TextAndTokensRoundTrip) {
  const std::string text("caf\xc3\xa9 \x00\xff!", 9);
  const auto tokens = text_to_tokens(text);
  EXPECT_EQ(tokens[3], 0xc3);
  EXPECT_EQ(tokens_to_text(tokens), text);
  const std::vector<int32_t> bad = {65, 256};
  EXPECT_THAT(error_of([&] { tokens_to_text(bad); }), HasSubstr("token 1 is 256"));
}

TEST(NGram, CorpusPromptComesFromHeldOutText) {
  const auto corpus = load_corpus(default_corpus_path());
  EXPECT_GT(corpus->train_size, 1000000);
  EXPECT_GT(corpus->held_out_text().size(), 100000u);
  EXPECT_EQ(corpus->text[corpus->train_size - 1], '\n');
  EXPECT_EQ(tokens_to_text(corpus_prompt(10, 30)), corpus->held_out_text().substr(10, 30));
  EXPECT_THAT(error_of([] { corpus_prompt(0, 100000000); }), HasSubstr("held-out bytes"));
}

TEST(NGram, UnknownPresetListsNames) {
  const auto message = error_of([] { make_ngram_model("ngram-9"); });
  EXPECT_THAT(message, HasSubstr("'ngram-9'"));
  EXPECT_THAT(message, HasSubstr("ngram-1, ngram-2, ngram-3, ngram-4, ngram-5, prompt-lookup"));
  EXPECT_EQ(make_ngram_model("ngram-4")->name(), "ngram-4");
  EXPECT_EQ(make_ngram_model("ngram-4")->vocab(), 256);
  EXPECT_EQ(make_ngram_model("ngram-4")->eos_token(), -1);
}

TEST(NGram, MissingOrEmptyCorpusNamesPath) {
  const std::string missing = "/nonexistent/speclab/corpus.txt";
  EXPECT_THAT(error_of([&] { make_ngram_model("ngram-2", missing); }), HasSubstr(missing));
  const auto empty = std::filesystem::temp_directory_path() / "speclab_ngram_empty_corpus.txt";
  std::ofstream(empty).close();
  const auto message = error_of([&] { make_ngram_model("ngram-2", empty.string()); });
  EXPECT_THAT(message, HasSubstr(empty.string()));
  EXPECT_THAT(message, HasSubstr("0 bytes"));
  std::filesystem::remove(empty);
}

TEST(NGram, RejectsBadOrders) {
  EXPECT_THAT(error_of([] { KneserNey("abc", 0); }), HasSubstr("order 0"));
  EXPECT_THAT(error_of([] { KneserNey("abc", 9); }), HasSubstr("order 9"));
  EXPECT_THAT(error_of([] { KneserNey("a", 2); }), HasSubstr("1 bytes"));
}

// ---- prompt lookup ------------------------------------------------------------------------------

TEST(PromptLookup, ProposesContinuationOfMostRecentMatch) {
  const PromptLookupModel model;  // max_k 3, min_k 1, fallback ' '
  // "abc" occurred before X and before Y: the most recent earlier occurrence wins.
  EXPECT_EQ(model.propose(text_to_tokens("abcXabcYabc")), 'Y');
  // "Qdc" and "dc" never occurred before; k = 1 finds the last earlier 'c' (before 'Q').
  EXPECT_EQ(model.propose(text_to_tokens("cPcQdc")), 'Q');
  // The longest k wins over a more recent shorter match: "xab" -> '1', though "b" -> '2' is later.
  EXPECT_EQ(model.propose(text_to_tokens("xab1b2xab")), '1');
  // A match may overlap the suffix.
  EXPECT_EQ(model.propose(text_to_tokens("aaaa")), 'a');
}

TEST(PromptLookup, NoMatchProposesFallback) {
  const PromptLookupModel model;
  EXPECT_EQ(model.propose(text_to_tokens("xyz")), ' ');
  EXPECT_EQ(model.propose(text_to_tokens("x")), ' ');
  const PromptLookupModel newline(2, 2, '\n');
  EXPECT_EQ(newline.propose(text_to_tokens("abcabd")), '\n');  // "bd" never occurred before
  EXPECT_EQ(newline.propose(text_to_tokens("abcab")), 'c');
}

TEST(PromptLookup, RowsAreOneHotOnTheProposal) {
  auto model = make_ngram_model("prompt-lookup");
  EXPECT_EQ(model->name(), "prompt-lookup");
  const std::vector<int32_t> tokens = text_to_tokens("the cat sat on the mat; the cat");
  const int64_t m = 8;
  const auto probs = score_rows(*model, tokens, m);
  const auto& lookup = static_cast<const PromptLookupModel&>(*model);
  for (int64_t j = 0; j < m; ++j) {
    const int32_t proposal = lookup.propose(std::span(tokens).first(tokens.size() - m + 1 + j));
    for (int64_t t = 0; t < kByteVocab; ++t) {
      ASSERT_EQ(probs[j * kByteVocab + t], t == proposal ? 1.0f : 0.0f) << j << " " << t;
    }
  }
  // The last row follows "the cat" -> " sat".
  EXPECT_EQ(probs[(m - 1) * kByteVocab + ' '], 1.0f);
  EXPECT_EQ(lookup.propose(text_to_tokens("the cat sat on the mat; the")), ' ');
  EXPECT_EQ(lookup.propose(text_to_tokens("the cat sat on the mat; the cat s")), 'a');
}

TEST(PromptLookup, RejectsBadParameters) {
  EXPECT_THAT(error_of([] { PromptLookupModel(2, 3); }), HasSubstr("min_k = 3"));
  EXPECT_THAT(error_of([] { PromptLookupModel(3, 0); }), HasSubstr("min_k = 0"));
  EXPECT_THAT(error_of([] { PromptLookupModel(3, 1, 300); }), HasSubstr("fallback token 300"));
  EXPECT_EQ(PromptLookupModel(3, 1, 0, 32000).vocab(), 32000);
}

}  // namespace
}  // namespace speclab
