// Tree decoding (docs/verifiers.md V6): draft a token tree per request breadth-first from the draft
// model, score every node with one target call (per-node contexts: the tree attention mask of a
// real LLM), verify with recursive rejection sampling (or V7 traversal), append the accepted path
// and one token.
#include <fmt/format.h>

#include <algorithm>
#include <numeric>

#include "core/base/error.hpp"
#include "core/base/mutants.hpp"
#include "core/base/philox.hpp"
#include "core/decode/decode.hpp"
#include "core/decode/decode_detail.hpp"
#include "core/sampling/sampling.hpp"

namespace speclab {
namespace {

using namespace detail;

// Caps the tree so one step's buffers stay small whatever the shape.
struct Node {
  int32_t parent = -1;  // -1 for the root
  int32_t token = -1;
  int64_t depth = 0;
};

// The candidates of one node under the tree method's law (decode.hpp).
std::vector<int32_t> draw_children(std::span<const float> q, int64_t k, TreeMethod method,
                                   RandomAddress& address) {
  std::vector<int32_t> children;
  if (method == TreeMethod::kTopk || method == TreeMethod::kTopkSoftmaxQ) {
    std::vector<int32_t> order(q.size());
    std::iota(order.begin(), order.end(), 0);
    const int64_t n = std::min<int64_t>(k, static_cast<int64_t>(q.size()));
    std::partial_sort(order.begin(), order.begin() + n, order.end(),
                      [&](int32_t a, int32_t b) { return q[a] > q[b] || (q[a] == q[b] && a < b); });
    children.assign(order.begin(), order.begin() + n);
    return children;
  }
  // Traversal verification's candidates are drawn without replacement, as tree-swor's.
  const bool without_replacement = method == TreeMethod::kSwor || method == TreeMethod::kTraversal;
  std::vector<float> remaining;
  if (without_replacement) remaining.assign(q.begin(), q.end());
  for (int64_t j = 0; j < k; ++j) {
    const uint32_t bits = philox_bits(address);
    ++address.index;
    if (without_replacement) {
      // Without replacement: stop when no undrawn token has weight in the sampler's 2^-58 fixed
      // point (a float sum is not the test: weights below 2^-58 are positive yet undrawable).
      // That is an exact sampler of this law running out of support, so the node keeps fewer
      // than k children; verification needs nothing more (proofs/v6_tree.md §1: the number of
      // siblings may depend on the siblings drawn before).
      if (fixed_point_total(remaining) == 0) break;
      const int32_t c = sample_categorical(remaining, bits);
      remaining[c] = 0.0f;
      children.push_back(c);
    } else {
      children.push_back(sample_categorical(q, bits));
    }
  }
  return children;
}

}  // namespace

DecodeResult tree_speculative_decode(LanguageModel& target, LanguageModel& draft,
                                     std::span<const std::vector<int32_t>> prompts,
                                     const DecodeConfig& config) {
  check_same_vocabulary(target, draft);
  validate_decode_config(config, prompts, target.vocab(), false);
  const TreeVerifier& tree = std::get<TreeVerifier>(config.verifier);
  validate_tree_branches(tree.branches, target.vocab());
  const int64_t v = target.vocab();
  const int64_t depth = static_cast<int64_t>(tree.branches.size());
  SpeculativeRun run(target, draft, prompts, config, depth);
  DecodeMetrics& m = run.metrics();

  for (uint32_t step = config.first_step;; ++step) {
    const std::vector<int64_t> active = run.active();
    if (active.empty()) break;
    const int64_t n_active = static_cast<int64_t>(active.size());

    // Draft the trees breadth-first; q rows are kept per node (the law of its children).
    std::vector<std::vector<Node>> trees(n_active, std::vector<Node>{Node{}});
    std::vector<std::vector<std::vector<float>>> q_rows(n_active);
    std::vector<int64_t> tree_depth(n_active);
    std::vector<RandomAddress> addresses(n_active);
    // The id that addresses each slot's draws and verification (mutant: the slot itself).
    std::vector<uint32_t> request_ids;
    for (int64_t k = 0; k < n_active; ++k) {
      request_ids.push_back(mutant(Mutant::kTreeSlotNoise) ? static_cast<uint32_t>(k)
                                                           : config.request_id(active[k]));
    }
    auto path_tokens = [&](int64_t k, int32_t node) {
      std::vector<int32_t> path = run.sequence(active[k]);
      std::vector<int32_t> suffix;
      for (int32_t n = node; n > 0; n = trees[k][n].parent) suffix.push_back(trees[k][n].token);
      path.insert(path.end(), suffix.rbegin(), suffix.rend());
      return path;
    };
    for (int64_t k = 0; k < n_active; ++k) {
      tree_depth[k] = std::min(depth, run.tokens_left(active[k]) - 1);
      addresses[k] = {config.seed, request_ids[k], step, 0, Purpose::kDraftSample, 0};
      q_rows[k].resize(1);
    }
    for (int64_t d = 0; d < depth; ++d) {
      std::vector<std::vector<int32_t>> contexts;
      std::vector<std::pair<int64_t, int32_t>> who;  // (request slot, node)
      for (int64_t k = 0; k < n_active; ++k) {
        if (d >= tree_depth[k]) continue;
        for (int32_t n = 0; n < static_cast<int32_t>(trees[k].size()); ++n) {
          if (trees[k][n].depth != d) continue;
          who.emplace_back(k, n);
          contexts.push_back(path_tokens(k, n));
        }
      }
      if (who.empty()) break;
      std::vector<ScoreRequest> requests;
      for (size_t j = 0; j < who.size(); ++j) {
        requests.push_back({contexts[j], 1, active[who[j].first]});
      }
      // Mutant: the draft sampled with the target's pipeline.
      const std::vector<float> q = draft.score(
          requests, mutant(Mutant::kTreeDraftSampling) ? config.sampling : config.draft_sampling);
      // Mutant: q rows for verification at the target's sampling parameters, not the draft's.
      const std::vector<float> q_verify = mutant(Mutant::kTreeDraftWarpingMismatch)
                                              ? draft.score(requests, config.sampling)
                                              : std::vector<float>{};
      const std::vector<float>& q_verified = q_verify.empty() ? q : q_verify;
      for (size_t j = 0; j < who.size(); ++j) {
        const auto [k, n] = who[j];
        std::span<const float> row(&q[j * v], v);
        q_rows[k][n].assign(&q_verified[j * v], &q_verified[(j + 1) * v]);
        addresses[k].position = static_cast<uint32_t>(d + 1);
        for (int32_t c : draw_children(row, tree.branches[d], tree.method, addresses[k])) {
          trees[k].push_back({n, c, d + 1});
          q_rows[k].emplace_back();
        }
      }
    }

    // One target call over every node of every tree.
    int64_t max_nodes = 0;
    for (const auto& tree : trees) max_nodes = std::max<int64_t>(max_nodes, tree.size() - 1);
    std::vector<std::vector<int32_t>> contexts;
    std::vector<ScoreRequest> requests;
    for (int64_t k = 0; k < n_active; ++k) {
      for (int32_t n = 0; n < static_cast<int32_t>(trees[k].size()); ++n) {
        contexts.push_back(path_tokens(k, n));
      }
    }
    for (size_t j = 0, k = 0, n = 0; j < contexts.size(); ++j) {
      if (n == trees[k].size()) ++k, n = 0;
      requests.push_back({contexts[j], 1, active[k]});
      ++n;
    }
    const std::vector<float> p = target.score(requests, config.sampling);

    const int64_t width = max_nodes + 1;
    std::vector<float> probs_target(n_active * width * v, 0.0f),
        probs_draft(n_active * width * v, 0.0f);
    std::vector<int32_t> parents(n_active * width, 0), tokens(n_active * width, 0),
        n_nodes(n_active, 0);
    int64_t row = 0;
    for (int64_t k = 0; k < n_active; ++k) {
      n_nodes[k] = static_cast<int32_t>(trees[k].size() - 1);
      for (int64_t n = 0; n < static_cast<int64_t>(trees[k].size()); ++n, ++row) {
        std::copy_n(&p[row * v], v, &probs_target[(k * width + n) * v]);
        if (!q_rows[k][n].empty()) {
          std::copy(q_rows[k][n].begin(), q_rows[k][n].end(), &probs_draft[(k * width + n) * v]);
        } else {
          // A leaf has no children, so its q is never read; a valid row keeps validation quiet.
          std::copy_n(&p[row * v], v, &probs_draft[(k * width + n) * v]);
        }
        parents[k * width + n] = std::max(trees[k][n].parent, 0);
        tokens[k * width + n] = std::max(trees[k][n].token, 0);
      }
    }
    const TreeBatch tree_batch{n_active, max_nodes, v,       probs_target, probs_draft,
                               parents,  tokens,    n_nodes, request_ids,  {}};
    const double verify_start = now_seconds();
    const TreeResult verdict =
        verify_tree(tree_batch, {.method = tree.method, .seed = config.seed, .step = step});
    m.verify_seconds += now_seconds() - verify_start;

    for (int64_t k = 0; k < n_active; ++k) {
      const int64_t n = verdict.n_accepted[k];
      // β at the accepted path's node of depth i: the node whose children were tested there.
      std::vector<double> betas(std::min<int64_t>(n + 1, tree_depth[k]));
      for (size_t i = 0; i < betas.size(); ++i) {
        const int32_t node = i == 0 ? 0 : verdict.accepted_nodes[k * width + i - 1];
        betas[i] =
            overlap(&probs_target[(k * width + node) * v], &probs_draft[(k * width + node) * v], v);
      }
      // The models scored every branch under one sequence id and last saw whichever node came
      // last, so only the context before the tree is known to be theirs and the accepted path's.
      run.commit(active[k], tree_depth[k], n, betas, verdict.residual_fallback[k] != 0,
                 std::span<const int32_t>(verdict.emitted_tokens).subspan(k * width, width), 0);
    }
  }
  return run.finish();
}

}  // namespace speclab
