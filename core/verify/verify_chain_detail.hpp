// Internals shared by the reference and the fast chain verifiers (core/verify/verify_chain*.cpp).
#pragma once

#include <span>

#include "core/verify/verify_chain.hpp"

namespace speclab {

/// Shapes, γ, leniency and token ids only; no probability row is read.
void validate_chain_shapes(const ChainBatch& batch, const ChainParams& params);

namespace detail {

inline int64_t draft_count(const ChainBatch& batch, int64_t r) {
  return batch.n_draft.empty() ? batch.gamma : batch.n_draft[r];
}

inline uint32_t request_id(const ChainBatch& batch, int64_t r) {
  return batch.request_ids.empty() ? static_cast<uint32_t>(r) : batch.request_ids[r];
}

/// p_{i+1} of request r (0-based i; i = γ_r is the bonus row).
inline std::span<const float> target_row(const ChainBatch& batch, int64_t r, int64_t i) {
  return batch.probs_target.subspan((r * (batch.gamma + 1) + i) * batch.vocab, batch.vocab);
}

/// q_{i+1} of request r (0-based i).
inline std::span<const float> draft_row(const ChainBatch& batch, int64_t r, int64_t i) {
  return batch.probs_draft.subspan((r * batch.gamma + i) * batch.vocab, batch.vocab);
}

/// A draft token must have been drawn from the row it is verified against: q(x) = 0 means the
/// caller's q is not the draft's law (another temperature or filter, raw logits), and a test
/// would reject x whatever p says. Throws InvalidInput naming the token, request and position.
void check_drafted_from_q(float prob_draft, int32_t token, int64_t r, int64_t i, int64_t gamma);

ChainResult make_result(const ChainBatch& batch, const ChainParams& params);
void finish_result(ChainResult& result);

}  // namespace detail
}  // namespace speclab
