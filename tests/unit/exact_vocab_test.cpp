// Exact rational checks of the heterogeneous-vocabulary verifiers (proofs/heterogeneous_vocab.md):
// TLI, SLEM and SLRS emit the target chain's stream exactly over toy tokenizers whose strings have
// several draft tokenizations, and the mutants do not. The values in comments are derived by hand
// from the definitions, not from the code under test.
#include "core/exact/exact_vocab.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <rapidcheck/gtest.h>

#include <string>
#include <vector>

#include "core/base/error.hpp"
#include "tests/support/error_of.hpp"
#include "tests/support/exact_rows.hpp"

namespace speclab::exact {
namespace {

constexpr VocabMethod kMethods[] = {VocabMethod::kIntersection, VocabMethod::kStringMatch,
                                    VocabMethod::kStringRejection};

// Target {a, b, ab, ba, bab}; draft {a, b, ab, bb}. "ab" has two draft tokenizations (ab, a·b),
// "ba" and "bab" only pieces (b·a; b·ab, b·a·b), and the draft token "bb" spells no target token.
const ToyVocabulary kTarget{{"a", "b", "ab", "ba", "bab"}};
const ToyVocabulary kDraft{{"a", "b", "ab", "bb"}};

MarkovChain target_chain() {
  return MarkovChain{5,
                     {
                         {Q(1, 4), Q(1, 4), Q(0), Q(1, 3), Q(1, 6)},     // after a
                         {Q(1, 2), Q(0), Q(1, 5), Q(1, 10), Q(1, 5)},    // after b
                         {Q(0), Q(1, 3), Q(1, 3), Q(0), Q(1, 3)},        // after ab
                         {Q(1, 6), Q(1, 6), Q(1, 6), Q(1, 6), Q(1, 3)},  // after ba
                         {Q(1, 2), Q(1, 2), Q(0), Q(0), Q(0)},           // after bab
                     }};
}

// q(b | a) > 0 and q(ab | ·) > 0: "ab" is drawn both ways; q(bb | ·) > 0 at a and ab, so the
// intersection {a, b, ab} has mass below 1 there.
ToyPair several_tokenizations() {
  return ToyPair{kTarget, kDraft, target_chain(),
                 MarkovChain{4,
                             {
                                 {Q(1, 3), Q(1, 3), Q(1, 6), Q(1, 6)},  // after a
                                 {Q(1, 4), Q(1, 4), Q(1, 2), Q(0)},     // after b
                                 {Q(0), Q(1, 2), Q(1, 4), Q(1, 4)},     // after ab
                                 {Q(1, 2), Q(0), Q(1, 2), Q(0)},        // after bb
                             }}};
}

// After the draft token a the draft always draws bb: TLI's intersection mass is 0 there, so it
// stops drafting.
ToyPair vanishing_intersection() {
  ToyPair pair = several_tokenizations();
  pair.draft_chain.transition[0] = {Q(0), Q(0), Q(0), Q(1)};
  return pair;
}

// Every draft token is one character: every string has exactly one draft tokenization.
ToyPair byte_drafter() {
  return ToyPair{kTarget, ToyVocabulary{{"a", "b"}}, target_chain(),
                 MarkovChain{2, {{Q(1, 3), Q(2, 3)}, {Q(3, 4), Q(1, 4)}}}};
}

// Target {a, b, ab, bab}: its prefix set {a, b, ab, ba, bab} holds "ba", which is no target
// token. Draft {a, b, c, ab, ca, ab}: 'c' starts no target string (ℓ = 0), and ids 3 and 5 both
// spell "ab" (TLI sums them).
ToyPair foreign_characters() {
  return ToyPair{ToyVocabulary{{"a", "b", "ab", "bab"}},
                 ToyVocabulary{{"a", "b", "c", "ab", "ca", "ab"}},
                 MarkovChain{4,
                             {
                                 {Q(1, 2), Q(1, 4), Q(1, 4), Q(0)},
                                 {Q(1, 3), Q(0), Q(1, 3), Q(1, 3)},
                                 {Q(0), Q(1, 2), Q(0), Q(1, 2)},
                                 {Q(1, 5), Q(2, 5), Q(1, 5), Q(1, 5)},
                             }},
                 MarkovChain{6,
                             {
                                 {Q(1, 2), Q(0), Q(1, 2), Q(0), Q(0), Q(0)},              // a
                                 {Q(1, 4), Q(1, 4), Q(1, 4), Q(0), Q(0), Q(1, 4)},        // b
                                 {Q(1, 3), Q(1, 3), Q(0), Q(0), Q(1, 3), Q(0)},           // c
                                 {Q(0), Q(1, 2), Q(0), Q(1, 2), Q(0), Q(0)},              // ab
                                 {Q(1, 4), Q(1, 4), Q(1, 4), Q(1, 4), Q(0), Q(0)},        // ca
                                 {Q(1, 6), Q(1, 6), Q(1, 6), Q(1, 6), Q(1, 6), Q(1, 6)},  // ab'
                             }}};
}

void expect_lossless(const ToyPair& pair, VocabMethod method, int max_length) {
  for (int gamma = 1; gamma <= kMaxVocabGamma; ++gamma) {
    for (int length = 1; length <= max_length; ++length) {
      for (int start = 0; start < pair.target_chain.vocab; ++start) {
        EXPECT_EQ(enumerate_vocab_stream(pair, start, gamma, length, method),
                  chain_distribution(pair.target_chain, start, length))
            << vocab_method_name(method) << " γ = " << gamma << " length = " << length
            << " start = " << start;
      }
    }
  }
}

// True when the mutant's law differs from the target chain's for some γ ≤ 3 and start, at
// length 4.
bool mutant_is_lossy(const ToyPair& pair, VocabMethod method, VocabMutant mutant) {
  for (int gamma = 1; gamma <= kMaxVocabGamma; ++gamma) {
    for (int start = 0; start < pair.target_chain.vocab; ++start) {
      if (enumerate_vocab_stream(pair, start, gamma, kMaxVocabLength, method, mutant) !=
          chain_distribution(pair.target_chain, start, kMaxVocabLength)) {
        return true;
      }
    }
  }
  return false;
}

TEST(ExactVocab, GreedyTokenizersTakeTheLongestMatchAndTheLowestId) {
  EXPECT_EQ(greedy_tokenize(kTarget, "bab"), (std::vector<int>{4}));
  EXPECT_EQ(greedy_tokenize(kTarget, "baab"), (std::vector<int>{3, 2}));
  EXPECT_EQ(greedy_tokenize(kDraft, "bab"), (std::vector<int>{1, 2}));
  EXPECT_EQ(greedy_tokenize(kDraft, "ba"), (std::vector<int>{1, 0}));
  EXPECT_EQ(greedy_tokenize(ToyVocabulary{{"a", "ab", "b", "ab"}}, "abab"),
            (std::vector<int>{1, 1}));
  // The draft context rule: the last draft token of each committed target string.
  const ToyPair pair = several_tokenizations();
  EXPECT_EQ(draft_state_after(pair, 0), 0);                  // a
  EXPECT_EQ(draft_state_after(pair, 2), 2);                  // ab
  EXPECT_EQ(draft_state_after(pair, 3), 0);                  // ba = b·a
  EXPECT_EQ(draft_state_after(pair, 4), 2);                  // bab = b·ab
  EXPECT_EQ(draft_state_after(foreign_characters(), 2), 3);  // ab: the lower of ids 3 and 5
}

TEST(ExactVocab, EveryMethodIsLosslessWithSeveralTokenizations) {
  for (VocabMethod method : kMethods) expect_lossless(several_tokenizations(), method, 4);
}

TEST(ExactVocab, EveryMethodIsLosslessWhenTheIntersectionMassVanishes) {
  for (VocabMethod method : kMethods) expect_lossless(vanishing_intersection(), method, 4);
}

TEST(ExactVocab, EveryMethodIsLosslessWithASingleCharacterDrafter) {
  for (VocabMethod method : kMethods) expect_lossless(byte_drafter(), method, 4);
}

TEST(ExactVocab, TliAndSlrsAreLosslessWithForeignCharactersAndBottom) {
  const ToyPair pair = foreign_characters();
  expect_lossless(pair, VocabMethod::kIntersection, 4);
  expect_lossless(pair, VocabMethod::kStringRejection, 4);
  // ⊥ has positive probability here (see SlrsProposalLawMatchesHandDerivation).
  EXPECT_GT(slrs_proposal_law(pair, 1).bottom, 0);
}

RC_GTEST_PROP(ExactVocab, EveryMethodIsLosslessForGeneratedChains, ()) {
  ToyPair pair = several_tokenizations();
  pair.target_chain = testing::gen_exact_chain(5);
  pair.draft_chain = testing::gen_exact_chain(4);
  const int start = *rc::gen::inRange(0, 5);
  const int gamma = *rc::gen::inRange(1, kMaxVocabGamma + 1);
  const int length = *rc::gen::inRange(1, 4);
  for (VocabMethod method : kMethods) {
    RC_ASSERT(enumerate_vocab_stream(pair, start, gamma, length, method) ==
              chain_distribution(pair.target_chain, start, length));
  }
}

TEST(ExactVocab, SlrsProposalLawMatchesHandDerivation) {
  // Target {a, b, ab} and draft {a, b, ab}: P = {a, b, ab}, next(a) = {b}, next(b) = next(ab) = ∅.
  const ToyPair small{ToyVocabulary{{"a", "b", "ab"}}, ToyVocabulary{{"a", "b", "ab"}},
                      MarkovChain{3, std::vector<Row>(3, Row{Q(1, 3), Q(1, 3), Q(1, 3)})},
                      MarkovChain{3,
                                  {
                                      {Q(1, 3), Q(1, 2), Q(1, 6)},  // after a
                                      {Q(1, 2), Q(1, 4), Q(1, 4)},  // after b
                                      {Q(1, 3), Q(1, 3), Q(1, 3)},  // after ab
                                  }}};
  // From state b, nothing pending. Paths:
  //   a (1/2), then a or ab (1/3 + 1/6): "aa…" leaves P after "a"          → a,  1/4
  //   a (1/2), then b (1/2), then anything: "ab·" leaves P after "ab"       → ab, 1/4
  //   ab (1/4), then anything                                              → ab, 1/4
  //   b (1/4), then anything                                               → b,  1/4
  // ψ = (1/4, 1/4, 1/2): "ab" collects both of its tokenizations; no ⊥.
  const ProposalLaw from_b = slrs_proposal_law(small, 1);
  EXPECT_EQ(from_b.psi, (Row{Q(1, 4), Q(1, 4), Q(1, 2)}));
  EXPECT_EQ(from_b.bottom, 0);
  // From state a with "a" already drawn beyond the proposal's start: a or ab next gives "aa"
  // (→ a, 1/3 + 1/6), b gives "ab" and then anything (→ ab, 1/2); b cannot be proposed.
  const ProposalLaw pending_a = slrs_proposal_law(small, 0, "a");
  EXPECT_EQ(pending_a.psi, (Row{Q(1, 2), Q(0), Q(1, 2)}));
  EXPECT_EQ(pending_a.bottom, 0);

  // foreign_characters from draft state b, q(· | b) = 1/4 each on a, b, c, ab':
  //   a, then a or c (row of a: 1/2, 1/2)                    → a,   1/4
  //   b, then a (1/4), then a or c: "ba" is in P, no token    → ⊥,   1/16
  //   b, then b or c: "bb", "bc" leave P after "b"            → b,   1/8
  //   b, then ab' (1/4), then anything: "bab·"                → bab, 1/16
  //   c: 'c' starts no target string (ℓ = 0)                  → ⊥,   1/4
  //   ab', then anything: "ab·" leaves P after "ab"           → ab,  1/4
  const ProposalLaw foreign = slrs_proposal_law(foreign_characters(), 1);
  EXPECT_EQ(foreign.psi, (Row{Q(1, 4), Q(1, 8), Q(1, 4), Q(1, 16)}));
  EXPECT_EQ(foreign.bottom, Q(5, 16));
}

TEST(ExactVocab, TliUnnormalisedIsLossyWhenTheIntersectionMassIsBelowOne) {
  EXPECT_TRUE(mutant_is_lossy(several_tokenizations(), VocabMethod::kIntersection,
                              VocabMutant::kTliUnnormalised));
  // With every draft token in the intersection (M = 1) the mutant is TLI itself.
  EXPECT_FALSE(
      mutant_is_lossy(byte_drafter(), VocabMethod::kIntersection, VocabMutant::kTliUnnormalised));
}

TEST(ExactVocab, SlrsOneTokenizationIsLossyOnlyWithSeveralTokenizations) {
  EXPECT_TRUE(mutant_is_lossy(several_tokenizations(), VocabMethod::kStringRejection,
                              VocabMutant::kSlrsOneTokenization));
  // A single-character drafter spells each string one way: the drawn tokenization's probability
  // is ψ, so no test with a byte drafter can see this mutant.
  EXPECT_FALSE(mutant_is_lossy(byte_drafter(), VocabMethod::kStringRejection,
                               VocabMutant::kSlrsOneTokenization));
}

TEST(ExactVocab, SlrsWholePathIsLossyEvenWithASingleCharacterDrafter) {
  // The whole drawn path includes the character that ends the proposal, one of several.
  EXPECT_TRUE(
      mutant_is_lossy(byte_drafter(), VocabMethod::kStringRejection, VocabMutant::kSlrsWholePath));
}

// InvalidInput whose message contains `needle` (testing::error_of's "(no error)" when none).
template <typename F>
void expect_invalid(F&& call, const std::string& needle) {
  EXPECT_THAT(testing::error_of(call), ::testing::HasSubstr(needle));
}

TEST(ExactVocab, RejectsBadInput) {
  const ToyPair good = several_tokenizations();
  const auto stream = [](const ToyPair& pair, VocabMethod method) {
    return [pair, method] { enumerate_vocab_stream(pair, 0, 1, 1, method); };
  };
  {
    ToyPair pair = good;
    pair.target.strings[1] = "";
    expect_invalid(stream(pair, VocabMethod::kIntersection),
                   "target vocabulary token 1 is '' (0 characters)");
  }
  {
    ToyPair pair = good;
    pair.draft.strings[3] = "bbbb";
    expect_invalid(stream(pair, VocabMethod::kIntersection),
                   "draft vocabulary token 3 is 'bbbb' (4 characters); expected 1 to 3");
  }
  {
    ToyPair pair = good;
    pair.target.strings[3] = "ab";
    expect_invalid(stream(pair, VocabMethod::kIntersection),
                   "target vocabulary tokens 2 and 3 are both 'ab'");
  }
  {
    ToyPair pair = good;
    pair.target_chain.transition[2][1] = Q(1, 2);
    expect_invalid(stream(pair, VocabMethod::kStringRejection),
                   "target chain row 2 (after target token 2) sums to 7/6");
  }
  {
    ToyPair pair = good;
    pair.draft_chain.transition.pop_back();
    pair.draft_chain.vocab = 3;
    expect_invalid(stream(pair, VocabMethod::kStringMatch),
                   "draft chain has V = 3 and 3 transition rows; expected the draft vocabulary's "
                   "4 tokens");
  }
  {
    ToyPair pair = good;
    pair.draft.strings[1] = "c";
    expect_invalid(stream(pair, VocabMethod::kIntersection),
                   "draft vocabulary has no token 'b', which target token 1 ('b') uses");
  }
  expect_invalid(stream(foreign_characters(), VocabMethod::kStringMatch),
                 "target vocabulary has no token 'c', which draft token 2 ('c') uses");
  expect_invalid([&] { enumerate_vocab_stream(good, 5, 1, 1, VocabMethod::kIntersection); },
                 "start token is 5; expected a target token in [0, 5)");
  expect_invalid([&] { enumerate_vocab_stream(good, 0, 0, 1, VocabMethod::kIntersection); },
                 "gamma is 0; expected 1 ≤ γ ≤ 3");
  expect_invalid([&] { enumerate_vocab_stream(good, 0, 1, 5, VocabMethod::kIntersection); },
                 "length is 5; expected 1 ≤ L ≤ 4");
  expect_invalid(
      [&] {
        enumerate_vocab_stream(good, 0, 1, 1, VocabMethod::kStringMatch,
                               VocabMutant::kTliUnnormalised);
      },
      "mutant tli-unnormalised does not apply to method slem");
  expect_invalid([&] { slrs_proposal_law(good, 4); }, "draft state is 4");
  expect_invalid([&] { slrs_proposal_law(good, 0, "abab"); }, "pending is 'abab'");
  expect_invalid([&] { greedy_tokenize(kDraft, "abc"); }, "no token matches 'c' at character 2");
}

}  // namespace
}  // namespace speclab::exact
