// core/verify/verifier (the verifier registry): names round-trip, unknown names are refused with
// the list and a suggestion, and every flag of the table agrees with what the verifier it names
// actually does — its result's `lossy`, whether it reads probs_draft, its parameter defaults.
#include "core/verify/verifier.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <limits>
#include <set>

#include "core/base/error.hpp"
#include "core/exact/exact.hpp"
#include "core/exact/exact_tree.hpp"
#include "core/verify/verify_block.hpp"
#include "tests/support/chain_fixture.hpp"
#include "tests/support/error_of.hpp"
#include "tests/support/tree_fixture.hpp"

namespace speclab {
namespace {

using testing::fill_row;
using ::testing::HasSubstr;

// One request, γ = 2, V = 3, draft rows q (the draft tokens 0 and 1 drawable under both qs used
// below), target rows p = (1, 2, 3)/6.
testing::OwnedChainBatch chain_batch(const std::vector<int>& q) {
  testing::OwnedChainBatch b(1, 2, 3);
  for (int64_t i = 0; i <= 2; ++i) fill_row(b.target_row(0, i), {1, 2, 3});
  for (int64_t i = 0; i < 2; ++i) fill_row(b.draft_row(0, i), q);
  b.token(0, 0) = 0;
  b.token(0, 1) = 1;
  return b;
}

// One request, V = 3: the root with children of tokens 0 and 1 (the top-k of both qs below).
testing::OwnedTreeBatch tree_batch(const std::vector<int>& q) {
  testing::OwnedTreeBatch b(1, 2, 3);
  for (int64_t i = 0; i <= 2; ++i) {
    fill_row(b.target_row(0, i), {1, 2, 3});
    fill_row(b.draft_row(0, i), q);
  }
  b.parents = {-1, 0, 0};
  b.tokens = {0, 0, 1};
  return b;
}

// The tokens the verifier an entry names emits on the fixed instance with draft rows q.
std::vector<int32_t> emitted(const VerifierEntry& e, const std::vector<int>& q, uint64_t seed) {
  const testing::OwnedChainBatch chain = chain_batch(q);
  switch (e.family) {
    case VerifierFamily::kChain:
      return verify_chain(chain.view(), {.method = e.chain_method, .leniency = 0.5, .seed = seed})
          .emitted_tokens;
    case VerifierFamily::kBlock:
      return verify_block(chain.view(), {.seed = seed}).emitted_tokens;
    case VerifierFamily::kTypical:
      return verify_typical(chain.view(), {.seed = seed}).emitted_tokens;
    case VerifierFamily::kMatch:
      return verify_match(chain.view(), {.method = e.match_method, .seed = seed}).emitted_tokens;
    case VerifierFamily::kTree: {
      const TreeResult r =
          verify_tree(tree_batch(q).view(), {.method = e.tree_method, .seed = seed});
      std::vector<int32_t> tokens = r.emitted_tokens;
      tokens.push_back(r.n_accepted[0]);
      return tokens;
    }
  }
  throw Error("unknown family");
}

// Whether the verifier an entry names is lossless, decided by exact enumeration (core/exact, an
// implementation independent of the registry and of the float verifiers): p = (1, 2, 3)/6 and
// q = (3, 2, 1)/6 at every position, γ = 2 (trees: depth 2, 2 candidates per node), l = 1/2.
// Greedy is measured against greedy decoding (one-hot argmax p), every other verifier against p.
bool exactly_lossless(const VerifierEntry& e) {
  using exact::Q;
  const exact::Row p = {Q(1, 6), Q(2, 6), Q(3, 6)}, q = {Q(3, 6), Q(2, 6), Q(1, 6)};
  const std::vector<exact::Row> target(3, p), draft(2, q);
  exact::StepResult step;
  switch (e.family) {
    case VerifierFamily::kChain:
      step = exact::enumerate_step(target, draft, exact::Method{e.chain_method, Q(1, 2)});
      break;
    case VerifierFamily::kBlock:
      step = exact::enumerate_step(target, draft, exact::BlockMethod{});
      break;
    case VerifierFamily::kTypical:
      step = exact::enumerate_step(target, draft, exact::TypicalMethod{});
      break;
    case VerifierFamily::kMatch:
      step = exact::enumerate_step(target, draft, e.match_method);
      break;
    case VerifierFamily::kTree:
      step = exact::enumerate_tree_step(target, draft, e.tree_method, 2);
      break;
  }
  const exact::Row reference =
      e.family == VerifierFamily::kChain && e.chain_method == ChainMethod::kGreedy
          ? exact::one_hot_argmax(p)
          : p;
  return step.first_token_marginal == reference &&
         !exact::find_conditional_violation(step, std::vector<exact::Row>(3, reference));
}

TEST(VerifierRegistry, NamesRoundTripThroughSpecs) {
  std::set<std::string> seen;
  for (const VerifierEntry& e : verifier_registry()) {
    EXPECT_TRUE(seen.insert(std::string(e.name)).second) << "name " << e.name << " repeated";
    const VerifierSpec spec = make_verifier(e.name);
    EXPECT_EQ(verifier_name(spec), e.name);
    EXPECT_EQ(family_of(spec), e.family) << e.name;
    EXPECT_EQ(&entry_of(spec), &e) << e.name;
    EXPECT_EQ(find_verifier(e.name), &e) << e.name;
  }
  EXPECT_EQ(verifier_names().size(), verifier_registry().size());
  EXPECT_THAT(verifier_names_text(), HasSubstr("token | greedy | lenient"));
}

TEST(VerifierRegistry, ChainAndTreeMethodNamesAreTheRegistrys) {
  for (const VerifierEntry& e : verifier_registry()) {
    // tli and slrs are rules for reaching a draft of another vocabulary, over V1: no chain method
    // is named after them.
    if (e.family == VerifierFamily::kChain && e.vocab_rule == VocabRule::kShared) {
      EXPECT_EQ(to_string(e.chain_method), e.name);
      EXPECT_EQ(parse_chain_method(e.name), e.chain_method);
      EXPECT_EQ(is_lossy(e.chain_method), e.lossy) << e.name;
    }
    if (e.family == VerifierFamily::kTree) {
      EXPECT_EQ(to_string(e.tree_method), e.name);
      EXPECT_EQ(parse_tree_method(e.name), e.tree_method);
      EXPECT_EQ(is_lossy(e.tree_method), e.lossy) << e.name;
      EXPECT_EQ(needs_draft_probs(e.tree_method), e.needs_draft_probs) << e.name;
    }
  }
  EXPECT_THAT(testing::error_of([] { parse_chain_method("tli"); }),
              HasSubstr("method is \"tli\"; expected one of \"token\", \"greedy\", \"lenient\""));
  EXPECT_THAT(testing::error_of([] { parse_chain_method("block"); }),
              HasSubstr("method is \"block\"; expected one of \"token\", \"greedy\", \"lenient\""));
}

TEST(VerifierRegistry, UnknownNamesAreRefusedWithTheListAndASuggestion) {
  EXPECT_THAT(testing::error_of([] { make_verifier("medusa"); }),
              HasSubstr("verifier is \"medusa\"; expected one of \"token\", \"greedy\""));
  EXPECT_THAT(testing::error_of([] { verifier_entry("tokn", "--method"); }),
              HasSubstr("--method is \"tokn\" (did you mean \"token\"?); expected one of"));
  EXPECT_EQ(find_verifier("V1"), nullptr);
}

TEST(VerifierRegistry, LossyFlagIsWhatExactEnumerationShows) {
  for (const VerifierEntry& e : verifier_registry()) {
    EXPECT_EQ(exactly_lossless(e), !e.lossy) << e.name;
  }
}

TEST(VerifierRegistry, NeedsDraftProbsIsWhetherTheOutputDependsOnQ) {
  // Two draft distributions under which the same drafts are drawable (and the top-k is the same):
  // a verifier that reads q gives different tokens for some seed; one that does not, never.
  const std::vector<int> q1 = {3, 2, 1}, q2 = {4, 4, 2};
  for (const VerifierEntry& e : verifier_registry()) {
    bool differs = false;
    for (uint64_t seed = 0; seed < 200 && !differs; ++seed) {
      differs = emitted(e, q1, seed) != emitted(e, q2, seed);
    }
    EXPECT_EQ(differs, e.needs_draft_probs) << e.name;
  }
}

TEST(VerifierRegistry, ParameterDefaultsAreTheParameterStructs) {
  EXPECT_EQ(verifier_parameter("leniency").default_value, ChainParams{}.leniency);
  EXPECT_EQ(verifier_parameter("typical_epsilon").default_value, TypicalParams{}.epsilon);
  EXPECT_EQ(verifier_parameter("typical_delta").default_value, TypicalParams{}.delta);
  EXPECT_EQ(std::get<TypicalVerifier>(make_verifier("typical")).epsilon, TypicalParams{}.epsilon);
  EXPECT_EQ(std::get<ChainVerifier>(make_verifier("lenient")).leniency, ChainParams{}.leniency);
  EXPECT_EQ(verifier_parameter("leniency").help(),
            "leniency of lenient verification (V3); 1 is V1's test (l in (0, 1]); default 1");
  EXPECT_TRUE(verifier_parameter("leniency").admits(1.0));
  EXPECT_FALSE(verifier_parameter("leniency").admits(0.0));
  EXPECT_FALSE(verifier_parameter("typical_delta").admits(std::nan("")));
  EXPECT_THROW(verifier_parameter("temperature"), Error);
}

TEST(VerifierRegistry, EveryEntryReadsOnlyParametersThatExist) {
  for (const VerifierEntry& e : verifier_registry()) {
    for (std::string_view key : e.parameters) {
      EXPECT_NO_THROW(verifier_parameter(key)) << e.name << " reads " << key;
    }
  }
}

TEST(VerifierRegistry, TreeShapesAreCountedAndValidated) {
  // 2 + 2·2 + 2·2·1 = 10 nodes; 16 + 256 + 4096 saturates one past the limit.
  EXPECT_EQ(tree_node_count(std::vector<int64_t>{2, 2, 1}), 10);
  EXPECT_EQ(tree_node_count(std::vector<int64_t>{16, 16, 16}), kMaxTreeNodes + 1);
  EXPECT_EQ(tree_node_count(std::vector<int64_t>{10, 10}), 10 + 10 * 10);
  // A config may hold any int64 (found by tests/fuzz/config_fuzz.cpp): 4097 · 9e18 overflowed, to
  // a negative count under wrap-around, which passed the node limit.
  EXPECT_EQ(tree_node_count(std::vector<int64_t>{5000, 9'000'000'000'000'000'000}),
            kMaxTreeNodes + 1);
  EXPECT_EQ(tree_node_count(std::vector<int64_t>{1, std::numeric_limits<int64_t>::max(), 2}),
            kMaxTreeNodes + 1);
  EXPECT_EQ(std::get<TreeVerifier>(make_verifier("kseq", {3, 1})).branches,
            (std::vector<int64_t>{3, 1}));
  EXPECT_THAT(testing::error_of([] { validate_tree_branches({}, 4); }),
              HasSubstr("decode.branches is empty"));
  EXPECT_THAT(testing::error_of([] {
                validate_tree_branches(std::vector<int64_t>{2, 5}, 4);
              }),
              HasSubstr("decode.branches[1] is 5; expected 1 ≤ k ≤ V = 4"));
  EXPECT_THAT(testing::error_of([] {
                validate_tree_branches(std::vector<int64_t>{64, 64}, 100);
              }),
              HasSubstr("more than 4096 nodes"));
  EXPECT_NO_THROW(validate_tree_branches(std::vector<int64_t>{63, 63}, 100));
}

}  // namespace
}  // namespace speclab
