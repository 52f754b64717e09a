// Owned storage for a TreeBatch, and a builder of complete K-ary draft trees whose candidates are
// drawn by the declared law (docs/verifiers.md V6) from Philox draft-sample uniforms.
#pragma once

#include <algorithm>
#include <cstdint>
#include <numeric>
#include <vector>

#include "core/base/philox.hpp"
#include "core/sampling/sampling.hpp"
#include "core/verify/verify_tree.hpp"

namespace speclab::testing {

struct OwnedTreeBatch {
  int64_t batch = 0, max_nodes = 0, vocab = 0;
  std::vector<float> probs_target;    // [B, N+1, V]
  std::vector<float> probs_draft;     // [B, N+1, V]
  std::vector<int32_t> parents;       // [B, N+1]
  std::vector<int32_t> tokens;        // [B, N+1]
  std::vector<int32_t> n_nodes;       // [B] or empty
  std::vector<uint32_t> request_ids;  // [B] or empty
  std::vector<TreeMethod> methods;    // [B] or empty

  OwnedTreeBatch() = default;
  OwnedTreeBatch(int64_t b, int64_t n, int64_t v)
      : batch(b),
        max_nodes(n),
        vocab(v),
        probs_target(b * (n + 1) * v, 0.0f),
        probs_draft(b * (n + 1) * v, 0.0f),
        parents(b * (n + 1), -1),
        tokens(b * (n + 1), 0) {}

  TreeBatch view() const {
    return {batch,   max_nodes, vocab,   probs_target, probs_draft,
            parents, tokens,    n_nodes, request_ids,  methods};
  }
  float* target_row(int64_t r, int64_t i) {
    return &probs_target[(r * (max_nodes + 1) + i) * vocab];
  }
  float* draft_row(int64_t r, int64_t i) { return &probs_draft[(r * (max_nodes + 1) + i) * vocab]; }
  int32_t& parent(int64_t r, int64_t i) { return parents[r * (max_nodes + 1) + i]; }
  int32_t& token(int64_t r, int64_t i) { return tokens[r * (max_nodes + 1) + i]; }
};

/// Nodes of a complete K-ary tree of depth γ after the root: K + K² + … + K^γ.
inline int64_t kary_nodes(int64_t branches, int64_t depth) {
  int64_t total = 0, level = 1;
  for (int64_t d = 1; d <= depth; ++d) total += level *= branches;
  return total;
}

/// Fills request r of `batch` (max_nodes ≥ kary_nodes(K, γ)) with a complete K-ary tree of depth γ
/// in breadth-first order. `row_of(parent_token, depth)` gives the index into `targets`/`drafts`
/// (float rows of V) for a node at `depth` whose token is parent_token (−1 for the root). The
/// children of each node are drawn from its draft row by `method`'s law with the uniforms
/// (seed; request id, step, position = node index, kDraftSample, index = sibling number): i.i.d.,
/// without replacement (tree-swor and traversal: sequentially from q restricted to undrawn
/// tokens), or top-k (ties to the
/// lowest id).
template <class RowOf>
void fill_kary_tree(OwnedTreeBatch& batch, int64_t r, TreeMethod method, int64_t branches,
                    int64_t depth, const std::vector<std::vector<float>>& targets,
                    const std::vector<std::vector<float>>& drafts, RowOf row_of, uint64_t seed,
                    uint32_t request_id, uint32_t step) {
  const int64_t v = batch.vocab;
  std::vector<int32_t> level{0}, node_depth{0}, node_row{static_cast<int32_t>(row_of(-1, 0))};
  std::copy_n(targets[node_row[0]].begin(), v, batch.target_row(r, 0));
  std::copy_n(drafts[node_row[0]].begin(), v, batch.draft_row(r, 0));
  int32_t next = 1;
  for (int64_t d = 1; d <= depth; ++d) {
    std::vector<int32_t> children;
    for (int32_t parent : level) {
      const std::vector<float>& q = drafts[node_row[parent]];
      std::vector<int32_t> order(v);
      std::iota(order.begin(), order.end(), 0);
      std::stable_sort(order.begin(), order.end(),
                       [&](int32_t a, int32_t b) { return q[a] > q[b]; });
      std::vector<float> remaining = q;
      for (int64_t j = 0; j < branches; ++j) {
        const RandomAddress a{seed,
                              request_id,
                              step,
                              static_cast<uint32_t>(parent),
                              Purpose::kDraftSample,
                              static_cast<uint32_t>(j)};
        int32_t c = 0;
        if (method == TreeMethod::kTopk || method == TreeMethod::kTopkSoftmaxQ) {
          c = order[j];
        } else if (method == TreeMethod::kSwor || method == TreeMethod::kTraversal) {
          c = sample_categorical(remaining, philox_bits(a));
          remaining[c] = 0.0f;
        } else {
          c = sample_categorical(q, philox_bits(a));
        }
        const int32_t node = next++;
        batch.parent(r, node) = parent;
        batch.token(r, node) = c;
        node_depth.push_back(static_cast<int32_t>(d));
        node_row.push_back(static_cast<int32_t>(row_of(c, d)));
        std::copy_n(targets[node_row[node]].begin(), v, batch.target_row(r, node));
        std::copy_n(drafts[node_row[node]].begin(), v, batch.draft_row(r, node));
        children.push_back(node);
      }
    }
    level = std::move(children);
  }
}

}  // namespace speclab::testing
