// Every speculative engine's steps rebuilt from their documented addresses (core/decode/decode.hpp)
// and verified by the named verify function called directly: a chain step drafts
// x_i ~ q_i = q(·| context, x_1..x_{i−1}) at the draft's own sampling parameters with the uniform
// at (seed; id, step, i, kDraftSample); a tree step drafts breadth-first to depth min(depth, tokens
// left − 1), node children by the tree method's law with the uniform at (seed; id, step, depth,
// kDraftSample, index = draws so far in the step). The verifier is handed exactly those q rows, and
// the engine's tokens must be its output, step after step. The draft's settings differ from the
// target's in temperature and in a filter, so an engine that verifies against q rows from another
// pipeline (the target's, or T = 1) hands the verifier other rows than the ones its drafts came
// from, which changes some step's tokens.
#include <gtest/gtest.h>
#include <rapidcheck.h>
#include <rapidcheck/gtest.h>

#include <algorithm>
#include <numeric>
#include <string>
#include <vector>

#include "core/base/philox.hpp"
#include "core/decode/decode.hpp"
#include "core/sampling/sampling.hpp"
#include "core/verify/verifier.hpp"
#include "tests/support/chain_fixture.hpp"
#include "tests/support/markov_engine.hpp"
#include "tests/support/tree_fixture.hpp"

namespace speclab {
namespace {

constexpr int64_t kVocab = 6;
constexpr int32_t kEos = 5;

using Setup = testing::MarkovEngine;

Setup gen_setup(const std::string& name) {
  Setup s = testing::gen_markov_engine(name, kVocab, kEos, 12);
  // The temperatures never meet, and only the draft filters by top-k.
  s.config.sampling = {.temperature = *rc::gen::element(1.0, 0.7),
                       .top_p = *rc::gen::element(1.0, 0.9)};
  s.config.draft_sampling = {.temperature = *rc::gen::element(1.5, 0.5),
                             .top_k = *rc::gen::element<int64_t>(3, 4)};
  return s;
}

// One row of `model` at the end of `context`, through `sampling`.
std::vector<float> row_after(MarkovModel& model, const std::vector<int32_t>& context,
                             const SamplingParams& sampling) {
  const ScoreRequest request{context, 1, 0};
  return model.score(std::span(&request, 1), sampling);
}

// The accepted drafts and the last token of request `id`'s chain step.
std::vector<int32_t> chain_step(Setup& s, const std::vector<int32_t>& context, uint32_t id,
                                uint32_t step, int64_t left) {
  const DecodeConfig& c = s.config;
  const int64_t n_draft = std::min(c.gamma, left - 1);
  testing::OwnedChainBatch batch(1, c.gamma, kVocab);
  batch.n_draft = {static_cast<int32_t>(n_draft)};
  batch.request_ids = {id};
  const int64_t position = c.max_new_tokens - left;  // tokens generated before the step
  batch.positions = {position};
  std::vector<int32_t> sequence = context;
  for (int64_t i = 1; i <= n_draft; ++i) {
    const std::vector<float> q = row_after(s.draft, sequence, c.draft_sampling);
    std::copy(q.begin(), q.end(), batch.draft_row(0, i - 1));
    const RandomAddress a{c.seed, id, step, static_cast<uint32_t>(i), Purpose::kDraftSample, 0};
    // coupled drafts with the noise of the token's output position (the registry's DraftRule).
    batch.token(0, i - 1) =
        entry_of(c.verifier).draft_rule == DraftRule::kOutputNoise
            ? sample_gumbel(q, c.seed, id, static_cast<uint32_t>(position + i - 1))
            : sample_categorical(q, philox_bits(a));
    sequence.push_back(batch.token(0, i - 1));
  }
  for (int64_t i = 0; i <= n_draft; ++i) {  // p_{i+1} follows the context and i drafts
    const std::vector<int32_t> prefix(sequence.begin(), sequence.end() - (n_draft - i));
    const std::vector<float> p = row_after(s.target, prefix, c.sampling);
    std::copy(p.begin(), p.end(), batch.target_row(0, i));
  }
  ChainResult result;
  switch (family_of(c.verifier)) {
    case VerifierFamily::kChain: {
      const auto& chain = std::get<ChainVerifier>(c.verifier);
      result = verify_chain(
          batch.view(),
          {.method = chain.method, .leniency = chain.leniency, .seed = c.seed, .step = step});
      break;
    }
    case VerifierFamily::kBlock:
      result = verify_block(batch.view(), {.seed = c.seed, .step = step});
      break;
    case VerifierFamily::kTypical: {
      const auto& typical = std::get<TypicalVerifier>(c.verifier);
      result = verify_typical(
          batch.view(),
          {.epsilon = typical.epsilon, .delta = typical.delta, .seed = c.seed, .step = step});
      break;
    }
    case VerifierFamily::kMatch: {
      const auto& match = std::get<MatchVerifier>(c.verifier);
      result = verify_match(
          batch.view(), {.method = match.method, .sampling = c.token_sampling(), .seed = c.seed});
      break;
    }
    case VerifierFamily::kTree:
      RC_FAIL("a tree verifier in chain_step");
  }
  return {result.emitted_tokens.begin(), result.emitted_tokens.begin() + result.n_accepted[0] + 1};
}

// The children of one node drawn from q by the tree method's law (decode.hpp), consuming the
// step's draft uniforms in order: top-k takes none; a draw without replacement that finds no mass
// left in q's fixed point has consumed its uniform and ends the node's children.
std::vector<int32_t> draw_children(const std::vector<float>& q, int64_t k, TreeMethod method,
                                   RandomAddress& address) {
  std::vector<int32_t> children;
  if (method == TreeMethod::kTopk || method == TreeMethod::kTopkSoftmaxQ) {
    std::vector<int32_t> order(q.size());
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(), [&](int32_t a, int32_t b) { return q[a] > q[b]; });
    children.assign(order.begin(), order.begin() + std::min<int64_t>(k, kVocab));
    return children;
  }
  const bool without_replacement = method == TreeMethod::kSwor || method == TreeMethod::kTraversal;
  std::vector<float> remaining = q;
  for (int64_t j = 0; j < k; ++j) {
    const uint32_t bits = philox_bits(address);
    ++address.index;
    if (!without_replacement) {
      children.push_back(sample_categorical(q, bits));
      continue;
    }
    if (fixed_point_total(remaining) == 0) break;
    children.push_back(sample_categorical(remaining, bits));
    remaining[children.back()] = 0.0f;
  }
  return children;
}

// The accepted path and the last token of request `id`'s tree step.
std::vector<int32_t> tree_step(Setup& s, const std::vector<int32_t>& context, uint32_t id,
                               uint32_t step, int64_t left) {
  const DecodeConfig& c = s.config;
  const auto& tree = std::get<TreeVerifier>(c.verifier);
  const int64_t depth = std::min<int64_t>(static_cast<int64_t>(tree.branches.size()), left - 1);
  struct Node {
    int32_t parent, token;
    int64_t depth;
    std::vector<int32_t> path;  // the context and the tokens from the root to this node
  };
  std::vector<Node> nodes{{0, 0, 0, context}};
  RandomAddress address{c.seed, id, step, 0, Purpose::kDraftSample, 0};
  for (int64_t d = 0; d < depth; ++d) {
    const size_t end = nodes.size();  // breadth-first: depth d's nodes are the last ones added
    for (size_t n = 0; n < end; ++n) {
      if (nodes[n].depth != d) continue;
      address.position = static_cast<uint32_t>(d + 1);
      const std::vector<float> q = row_after(s.draft, nodes[n].path, c.draft_sampling);
      for (int32_t token : draw_children(q, tree.branches[d], tree.method, address)) {
        std::vector<int32_t> path = nodes[n].path;
        path.push_back(token);
        nodes.push_back({static_cast<int32_t>(n), token, d + 1, std::move(path)});
      }
    }
  }
  const int64_t n_nodes = static_cast<int64_t>(nodes.size()) - 1;
  testing::OwnedTreeBatch batch(1, n_nodes, kVocab);
  batch.n_nodes = {static_cast<int32_t>(n_nodes)};
  batch.request_ids = {id};
  for (int64_t n = 0; n <= n_nodes; ++n) {
    // Row n of each model follows node n's path; q is at the draft's own sampling parameters.
    const std::vector<float> p = row_after(s.target, nodes[n].path, c.sampling);
    const std::vector<float> q = row_after(s.draft, nodes[n].path, c.draft_sampling);
    std::copy(p.begin(), p.end(), batch.target_row(0, n));
    std::copy(q.begin(), q.end(), batch.draft_row(0, n));
    batch.parent(0, n) = nodes[n].parent;
    batch.token(0, n) = nodes[n].token;
  }
  const TreeResult result =
      verify_tree(batch.view(), {.method = tree.method, .seed = c.seed, .step = step});
  return {result.emitted_tokens.begin(), result.emitted_tokens.begin() + result.n_accepted[0] + 1};
}

// Request `id`'s tokens, its steps rebuilt one after another until EOS or the token budget.
std::vector<int32_t> rebuilt_tokens(Setup& s, const std::vector<int32_t>& prompt, uint32_t id) {
  const bool tree = family_of(s.config.verifier) == VerifierFamily::kTree;
  std::vector<int32_t> context = prompt, tokens;
  for (uint32_t step = 0;; ++step) {
    const int64_t left = s.config.max_new_tokens - static_cast<int64_t>(tokens.size());
    const std::vector<int32_t> emitted =
        tree ? tree_step(s, context, id, step, left) : chain_step(s, context, id, step, left);
    bool eos = false;
    for (int32_t t : emitted) {
      tokens.push_back(t);
      context.push_back(t);
      eos = t == kEos;
      if (eos) break;
    }
    if (eos || static_cast<int64_t>(tokens.size()) >= s.config.max_new_tokens) return tokens;
  }
}

void check_rebuilt_steps(const std::string& name) {
  Setup s = gen_setup(name);
  const auto n = *rc::gen::inRange<size_t>(1, 4);
  std::vector<std::vector<int32_t>> prompts;
  for (size_t b = 0; b < n; ++b) {
    prompts.push_back(*rc::gen::container<std::vector<int32_t>>(
        *rc::gen::inRange<size_t>(1, 4), rc::gen::inRange<int32_t>(0, kVocab - 1)));
  }
  // Ids that are not the slots, so a request's noise is its own only if addressed by its id.
  s.config.request_ids =
      *rc::gen::unique<std::vector<uint32_t>>(n, rc::gen::inRange<uint32_t>(10, 1000));
  const DecodeResult result = speculative_decode(s.target, s.draft, prompts, s.config);
  for (size_t b = 0; b < n; ++b) {
    RC_ASSERT(result.tokens[b] == rebuilt_tokens(s, prompts[b], s.config.request_ids[b]));
  }
}

class EngineStep : public ::testing::TestWithParam<std::string> {};

TEST_P(EngineStep, TokensAreTheVerifierOnTheRebuiltSteps) {
  const std::string name = GetParam();
  EXPECT_TRUE(rc::check("the engine's tokens are the named verifier on its rebuilt steps",
                        [&] { check_rebuilt_steps(name); }));
}

INSTANTIATE_TEST_SUITE_P(Engines, EngineStep, ::testing::ValuesIn(verifier_names()),
                         testing::verifier_param_name);

}  // namespace
}  // namespace speclab
