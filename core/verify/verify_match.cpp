// The match verifiers (see verify_match.hpp).
#include "core/verify/verify_match.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <numeric>
#include <vector>

#include "core/base/error.hpp"
#include "core/base/mutants.hpp"
#include "core/verify/verify_chain_detail.hpp"

namespace speclab {

void validate_match_sampling(MatchMethod method, TokenSampling sampling, std::string_view what) {
  if (method != MatchMethod::kCoupled || sampling == TokenSampling::kGumbel) return;
  throw InvalidInput(fmt::format(
      "{} is \"{}\" with method \"coupled\", which draws every token with Gumbel noise; {} "
      "must be \"gumbel\"",
      what, to_string(sampling), what));
}

void validate_match_batch(const ChainBatch& batch, const MatchParams& params) {
  validate_match_sampling(params.method, params.sampling, "sampling");
  // The chain shapes with probs_draft optional (V2's rule: nothing reads it).
  validate_chain_shapes(batch, ChainParams{.method = ChainMethod::kGreedy});
  const int64_t g = batch.gamma;
  if (!batch.positions.empty() && static_cast<int64_t>(batch.positions.size()) != batch.batch) {
    throw InvalidInput(fmt::format("positions has {} entries; expected B = {} (or none)",
                                   batch.positions.size(), batch.batch));
  }
  for (int64_t r = 0; r < batch.batch; ++r) {
    const int64_t n = detail::draft_count(batch, r);
    if (!batch.positions.empty()) {
      const int64_t start = batch.positions[r];
      if (start < 0 || start + n >= (int64_t{1} << 32)) {
        throw InvalidInput(fmt::format(
            "positions[{}] (request {}) is {}; expected 0 ≤ position and position + γ_b < 2^32", r,
            r, start));
      }
    }
    for (int64_t i = 0; i <= n; ++i) {
      validate_probability_row(detail::target_row(batch, r, i),
                               {"probs_target", r * (g + 1) + i, r, i + 1});
    }
  }
}

uint32_t match_noise_position(int64_t start, int64_t i) {
  return static_cast<uint32_t>(mutant(Mutant::kMatchDraftPositionNoise) ? i : start + i);
}

ChainResult verify_match(const ChainBatch& batch, const MatchParams& params) {
  validate_match_batch(batch, params);
  ChainResult out = detail::make_result(batch, ChainParams{.method = ChainMethod::kGreedy});
  const int64_t g = batch.gamma;
  for (int64_t r = 0; r < batch.batch; ++r) {
    const int64_t n_draft = detail::draft_count(batch, r);
    const int64_t start = batch.positions.empty() ? 0 : batch.positions[r];
    const uint32_t id = detail::request_id(batch, r);
    int64_t i = 0;
    for (;; ++i) {
      const int32_t y = sample_output_token(detail::target_row(batch, r, i), params.sampling,
                                            params.seed, id, match_noise_position(start, i));
      out.emitted_tokens[r * (g + 1) + i] = y;
      if (i == n_draft || batch.draft_tokens[r * g + i] != y) break;
      out.accept_mask[r * g + i] = 1;
    }
    out.n_accepted[r] = static_cast<int32_t>(i);
  }
  detail::finish_result(out);
  return out;
}

double sampled_match_acceptance(std::span<const float> p, std::span<const float> q) {
  double sum = 0.0;
  for (size_t v = 0; v < p.size(); ++v) sum += static_cast<double>(p[v]) * q[v];
  return sum;
}

MatchAcceptance match_acceptance(std::span<const float> p, std::span<const float> q,
                                 double overlap) {
  // Both races pick v iff E_u > E_v·max(p_u/p_v, q_u/q_v) for every u ≠ v, which has probability
  // 1 / S_v, S_v = Σ_u max(p_u/p_v, q_u/q_v) (proofs/match_verifiers.md §3). With ρ = q/p, the
  // maximum is q_u/q_v exactly when ρ_u > ρ_v, so S_v = P(ρ ≤ ρ_v)/p_v + Q(ρ > ρ_v)/q_v: one sort
  // by ρ (as float bits, which order like the floats, with the token in the low word) and prefix
  // sums. Ratios equal in float are grouped as ties.
  MatchAcceptance out;
  out.coupled_bound = overlap / (2.0 - overlap);  // (1 − TV)/(1 + TV) with TV = 1 − overlap
  std::vector<uint64_t> keys;
  keys.reserve(p.size());
  double q_total = 0.0;
  for (size_t v = 0; v < p.size(); ++v) {
    if (!(p[v] > 0.0f) && !(q[v] > 0.0f)) continue;
    const float ratio =
        p[v] > 0.0f ? std::max(q[v], 0.0f) / p[v] : std::numeric_limits<float>::infinity();
    uint32_t bits = 0;
    std::memcpy(&bits, &ratio, sizeof bits);
    keys.push_back(uint64_t{bits} << 32 | v);
    q_total += std::max(q[v], 0.0f);
    out.sampled_match += static_cast<double>(std::max(p[v], 0.0f)) * std::max(q[v], 0.0f);
  }
  std::sort(keys.begin(), keys.end());
  double p_upto = 0.0, q_upto = 0.0;
  for (size_t begin = 0; begin < keys.size();) {
    size_t end = begin;
    for (; end < keys.size() && keys[end] >> 32 == keys[begin] >> 32; ++end) {
      const size_t v = static_cast<uint32_t>(keys[end]);
      p_upto += std::max(p[v], 0.0f);
      q_upto += std::max(q[v], 0.0f);
    }
    for (size_t k = begin; k < end; ++k) {
      const size_t v = static_cast<uint32_t>(keys[k]);
      if (p[v] > 0.0f && q[v] > 0.0f) {
        out.coupled += 1.0 / (p_upto / p[v] + (q_total - q_upto) / q[v]);
      }
    }
    begin = end;
  }
  return out;
}

double coupled_acceptance(std::span<const float> p, std::span<const float> q) {
  return match_acceptance(p, q, 0.0).coupled;
}

double coupled_acceptance_bound(std::span<const float> p, std::span<const float> q) {
  double overlap = 0.0;
  for (size_t v = 0; v < p.size(); ++v) overlap += std::min(p[v], q[v]);
  return overlap / (2.0 - overlap);
}

}  // namespace speclab
