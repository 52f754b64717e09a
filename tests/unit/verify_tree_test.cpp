// core/verify/verify_tree (docs/verifiers.md V6): method names, fixed cases, K-SEQ's ρ, and every
// bad input — cycles and parents out of range, token ids, sibling rules, rows — with messages
// naming request and node.
#include "core/verify/verify_tree.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>

#include "core/base/error.hpp"
#include "tests/support/chain_fixture.hpp"
#include "tests/support/tree_fixture.hpp"

namespace speclab {
namespace {

using ::testing::ElementsAre;
using testing::fill_row;
using ::testing::HasSubstr;
using testing::OwnedTreeBatch;

std::string error_of(const OwnedTreeBatch& b, TreeMethod method = TreeMethod::kIid) {
  try {
    verify_tree(b.view(), {.method = method});
  } catch (const InvalidInput& e) {
    return e.what();
  }
  return "(no error)";
}

// One request, V = 3: root with children 1 (token 0) and 2 (token 1); node 1 has child 3 (token 2).
OwnedTreeBatch small_tree() {
  OwnedTreeBatch b(1, 3, 3);
  for (int64_t i = 0; i <= 3; ++i) {
    fill_row(b.target_row(0, i), {1, 1, 1});
    fill_row(b.draft_row(0, i), {1, 1, 1});
  }
  b.parents = {-1, 0, 0, 1};
  b.tokens = {0, 0, 1, 2};
  return b;
}

TEST(VerifyTree, MethodNamesRoundTrip) {
  for (TreeMethod m : {TreeMethod::kIid, TreeMethod::kSwor, TreeMethod::kTopk,
                       TreeMethod::kTopkSoftmaxQ, TreeMethod::kKseq, TreeMethod::kTraversal}) {
    EXPECT_EQ(parse_tree_method(to_string(m)), m);
    EXPECT_EQ(is_lossy(m), m == TreeMethod::kTopkSoftmaxQ);
  }
  try {
    parse_tree_method("tree");
    ADD_FAILURE();
  } catch (const InvalidInput& e) {
    EXPECT_THAT(e.what(), HasSubstr("tree method is \"tree\"; expected one of"));
  }
}

TEST(VerifyTree, TraversalKeepsAPathWhoseFirstTokenAloneWouldFail) {
  // docs/verifiers.md V7 on a chain: root p = (1/2, 1/2), q = (1, 0), child token 0: w₁ = 1/2;
  // node 1 p = (1, 0), q = (1/2, 1/2), child token 0: w₂ = min(1, w₁·1/(1/2)) = 1. The leaf, tested
  // first, passes surely: every seed accepts both tokens, and the bonus from node 2's p = (0, 1)
  // is 1. Token-level rejection (tree-swor with one child) accepts node 1 only with 1/2.
  OwnedTreeBatch b(1, 2, 2);
  fill_row(b.target_row(0, 0), {1, 1});
  fill_row(b.draft_row(0, 0), {1, 0});
  fill_row(b.target_row(0, 1), {1, 0});
  fill_row(b.draft_row(0, 1), {1, 1});
  fill_row(b.target_row(0, 2), {0, 1});
  fill_row(b.draft_row(0, 2), {1, 1});
  b.parents = {-1, 0, 1};
  b.tokens = {0, 0, 0};
  int swor_short = 0;
  for (uint64_t seed = 0; seed < 64; ++seed) {
    const TreeResult t = verify_tree(b.view(), {.method = TreeMethod::kTraversal, .seed = seed});
    EXPECT_EQ(t.n_accepted[0], 2) << seed;
    EXPECT_EQ(t.emitted_tokens, (std::vector<int32_t>{0, 0, 1})) << seed;
    EXPECT_EQ(t.accepted_nodes, (std::vector<int32_t>{1, 2, -1})) << seed;
    swor_short +=
        verify_tree(b.view(), {.method = TreeMethod::kSwor, .seed = seed}).n_accepted[0] < 2;
  }
  EXPECT_GT(swor_short, 0);  // P(all 64 accept) = 2^-64
}

TEST(VerifyTree, TraversalResidualAfterEverySiblingIsDeleted) {
  // Root p = (0, 0, 1), q = (1/2, 1/2, 0), two leaf children with tokens 0 and 1: both have weight
  // 0 (p(c) = 0), so both are deleted whatever u is; the root's residual is then norm((p − q)⁺) =
  // (0, 0, 1) after the first deletion and stays so after the second (Q = (0, 1, 0), w = 1):
  // token 2, nothing accepted, no fallback.
  OwnedTreeBatch b(1, 2, 3);
  fill_row(b.target_row(0, 0), {0, 0, 1});
  fill_row(b.draft_row(0, 0), {1, 1, 0});
  for (int64_t i = 1; i <= 2; ++i) {
    fill_row(b.target_row(0, i), {1, 1, 1});
    fill_row(b.draft_row(0, i), {1, 1, 1});
  }
  b.parents = {-1, 0, 0};
  b.tokens = {0, 0, 1};
  for (uint64_t seed = 0; seed < 16; ++seed) {
    const TreeResult t = verify_tree(b.view(), {.method = TreeMethod::kTraversal, .seed = seed});
    EXPECT_EQ(t.n_accepted[0], 0);
    EXPECT_EQ(t.emitted_tokens, (std::vector<int32_t>{2, -1, -1}));
    EXPECT_EQ(t.residual_fallbacks, 0);
  }
}

TEST(VerifyTree, OneHotTargetFollowsItsPath) {
  // p at the root is one-hot at 0 and at node 1 one-hot at 2: top-k accepts node 1 (p(0) = 1),
  // then node 3 (p(2) = 1), and node 3 is a leaf whose bonus row is one-hot at 1.
  auto b = small_tree();
  fill_row(b.target_row(0, 0), {1, 0, 0});
  fill_row(b.target_row(0, 1), {0, 0, 1});
  fill_row(b.target_row(0, 3), {0, 1, 0});
  for (TreeMethod m : {TreeMethod::kTopk, TreeMethod::kIid, TreeMethod::kSwor}) {
    const auto r = verify_tree(b.view(), {.method = m, .seed = 3});
    EXPECT_THAT(r.emitted_tokens, ElementsAre(0, 2, 1, -1)) << to_string(m);
    EXPECT_THAT(r.accepted_nodes, ElementsAre(1, 3, -1, -1)) << to_string(m);
    EXPECT_EQ(r.n_accepted[0], 2);
  }
}

TEST(VerifyTree, AllRejectedDrawsFromTheLastResidual) {
  // Top-k with p one-hot at token 2 and siblings 0 and 1: both accepted with probability 0, the
  // residual after zeroing 0 and 1 is one-hot at 2.
  auto b = small_tree();
  fill_row(b.target_row(0, 0), {0, 0, 1});
  const auto r = verify_tree(b.view(), {.method = TreeMethod::kTopk, .seed = 8});
  EXPECT_THAT(r.emitted_tokens, ElementsAre(2, -1, -1, -1));
  EXPECT_EQ(r.n_accepted[0], 0);
  EXPECT_FALSE(r.lossy);
  EXPECT_TRUE(verify_tree(b.view(), {.method = TreeMethod::kTopkSoftmaxQ}).lossy);
}

TEST(VerifyTree, TopkNeedsNoDraftProbabilities) {
  auto b = small_tree();
  b.probs_draft.clear();
  EXPECT_NO_THROW(verify_tree(b.view(), {.method = TreeMethod::kTopk}));
  EXPECT_THAT(error_of(b, TreeMethod::kIid), HasSubstr("probs_draft has 0 values; expected"));
}

TEST(VerifyTree, KseqRhoSolvesTheSpecTrEquation) {
  // Spec vector, k = 2: ρ* = (5 + √13)/6 (tests/property/exact_tree_test.cpp derives it).
  const std::vector<float> p{1.0f / 3, 2.0f / 3}, q{2.0f / 3, 1.0f / 3};
  EXPECT_NEAR(kseq_rho(p, q, 2), (5.0 + std::sqrt(13.0)) / 6.0, 1e-6);
  EXPECT_EQ(kseq_rho(p, q, 1), 1.0);  // k = 1 is V1
  EXPECT_EQ(kseq_rho(p, p, 3), 1.0);  // p = q
  try {
    kseq_rho(p, q, 0);
    ADD_FAILURE();
  } catch (const InvalidInput& e) {
    EXPECT_THAT(e.what(), HasSubstr("K-SEQ k is 0; expected k ≥ 1"));
  }
}

TEST(VerifyTree, StructureErrorsNameRequestAndNode) {
  auto b = small_tree();
  b.parents[3] = 3;  // a self-loop
  EXPECT_THAT(error_of(b),
              HasSubstr("parents[0, 3] (request 0, node 3) is 3; expected 0 ≤ parent < 3"));
  b.parents[3] = -2;
  EXPECT_THAT(error_of(b), HasSubstr("parents[0, 3] (request 0, node 3) is -2"));

  // A two-node cycle 1 → 2 → 1 cannot be written with parents before their nodes.
  b = small_tree();
  b.parents[1] = 2;
  EXPECT_THAT(error_of(b), HasSubstr("(request 0, node 1) is 2; expected 0 ≤ parent < 1"));

  b = small_tree();
  b.tokens[2] = 3;
  EXPECT_THAT(error_of(b),
              HasSubstr("tokens[0, 2] (request 0, node 2) is 3; expected a token id in [0, 3)"));

  b = small_tree();
  b.n_nodes = {4};
  EXPECT_THAT(error_of(b), HasSubstr("n_nodes[0] (request 0) is 4; expected 0 ≤ n_nodes ≤ N = 3"));

  b = small_tree();
  b.parents.pop_back();
  EXPECT_THAT(error_of(b), HasSubstr("parents has 3 values; expected B·(N+1)"));

  OwnedTreeBatch empty(0, 1, 2);
  EXPECT_THAT(error_of(empty), HasSubstr("batch size B is 0"));
}

TEST(VerifyTree, SiblingRulesOfTheCandidateLaw) {
  auto b = small_tree();
  b.tokens[2] = 0;  // siblings 1 and 2 both hold token 0
  EXPECT_EQ(error_of(b, TreeMethod::kIid), "(no error)") << "i.i.d. draws may repeat a token";
  EXPECT_THAT(error_of(b, TreeMethod::kSwor),
              HasSubstr("nodes 1 and 2 (request 0, children of node 0) both hold token 0"));
  EXPECT_THAT(error_of(b, TreeMethod::kTopk), HasSubstr("tree-topk needs distinct sibling tokens"));
  EXPECT_THAT(error_of(b, TreeMethod::kTraversal),
              HasSubstr("traversal needs distinct sibling tokens"));

  // Four children over V = 3 without replacement: more siblings than the vocabulary.
  OwnedTreeBatch wide(1, 4, 3);
  for (int64_t i = 0; i <= 4; ++i) {
    fill_row(wide.target_row(0, i), {1, 1, 1});
    fill_row(wide.draft_row(0, i), {1, 1, 1});
  }
  wide.parents = {-1, 0, 0, 0, 0};
  wide.tokens = {0, 0, 1, 2, 0};
  EXPECT_THAT(
      error_of(wide, TreeMethod::kSwor),
      HasSubstr("node 0 of request 0 has 4 children under tree-swor; expected at most V = 3"));

  // Without replacement, the draft row must keep mass for every sibling.
  b = small_tree();
  fill_row(b.draft_row(0, 0), {1, 0, 0});
  EXPECT_THAT(
      error_of(b, TreeMethod::kSwor),
      HasSubstr("node 2 (request 0, sibling 2 of node 0): probs_draft row 0 has no mass left"));
  EXPECT_THAT(
      error_of(b, TreeMethod::kTraversal),
      HasSubstr("no mass left after the 1 earlier siblings; traversal cannot have drawn it"));
}

TEST(VerifyTree, RowErrorsNameTheNode) {
  auto b = small_tree();
  b.target_row(0, 3)[1] = std::nanf("");
  EXPECT_THAT(error_of(b), HasSubstr("probs_target row 3 (request 0, position 2)"));
  EXPECT_THAT(error_of(b), HasSubstr("[node 3 at depth 2]"));
  b = small_tree();
  b.draft_row(0, 1)[0] = 0.9f;
  EXPECT_THAT(error_of(b), HasSubstr("probs_draft row 1 (request 0, position 1) sums to"));
  // A leaf's draft row is never read.
  b = small_tree();
  b.draft_row(0, 3)[0] = std::nanf("");
  EXPECT_EQ(error_of(b), "(no error)");
}

TEST(VerifyTree, SworNodeWithFewerChildrenThanBranchesIsV1) {
  // What the tree-swor drafter leaves when q's other weights are zero in fixed point: one child
  // although K = 3 were asked for. The batch carries no K, so the node is valid, and with one
  // sibling q⁽¹⁾ = q: the same tokens as the i.i.d. rule, V1 with one candidate.
  OwnedTreeBatch b(1, 1, 4);
  const std::vector<float> peaked = {1.0f, 1e-20f, 1e-20f, 1e-20f};
  std::copy(peaked.begin(), peaked.end(), b.draft_row(0, 0));
  fill_row(b.target_row(0, 0), {1, 2, 0, 1});
  fill_row(b.target_row(0, 1), {1, 1, 1, 1});
  b.parents = {-1, 0};
  b.tokens = {0, 0};
  std::vector<int> first(4, 0);
  for (uint64_t seed = 0; seed < 400; ++seed) {
    const auto swor = verify_tree(b.view(), {.method = TreeMethod::kSwor, .seed = seed});
    const auto iid = verify_tree(b.view(), {.method = TreeMethod::kIid, .seed = seed});
    ASSERT_EQ(swor.emitted_tokens, iid.emitted_tokens) << "seed " << seed;
    ++first[swor.emitted_tokens[0]];
  }
  EXPECT_EQ(first[2], 0);  // p(2) = 0: never emitted, though q(2) > 0
  EXPECT_GT(first[0], 0);  // accepted with probability p(0)/q(0) = 1/4
  EXPECT_GT(first[1], first[3]);
}

}  // namespace
}  // namespace speclab
