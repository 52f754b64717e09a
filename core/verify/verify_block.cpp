// Reference block verifier, docs/verifiers.md V5 (Sun et al. 2024): written to be obviously
// correct. Uniforms as docs/randomness.md: η_i at (seed; request, step, i, kBlockEta).
#include "core/verify/verify_block.hpp"

#include <algorithm>

#include "core/base/mutants.hpp"
#include "core/base/philox.hpp"
#include "core/sampling/sampling.hpp"
#include "core/verify/verify_chain_detail.hpp"

namespace speclab {

void validate_block_batch(const ChainBatch& batch) {
  validate_chain_batch(batch, ChainParams{ChainMethod::kToken, 1.0, 0, 0});
}

BlockWeights block_weights(const ChainBatch& batch, int64_t r) {
  const int64_t n_draft = detail::draft_count(batch, r);
  BlockWeights out{std::vector<double>(n_draft + 1, 1.0), std::vector<double>(n_draft + 1, 1.0)};
  for (int64_t i = 1; i <= n_draft; ++i) {
    const int32_t x = batch.draft_tokens[r * batch.gamma + i - 1];
    const double p = detail::target_row(batch, r, i - 1)[x];
    const double q = detail::draft_row(batch, r, i - 1)[x];
    out.w[i] = q > 0.0 ? std::min(1.0, out.w[i - 1] * p / q) : 0.0;
    // Mutant: the weight left unclamped, so a draft likelier under p than q lifts it past 1.
    if (mutant(Mutant::kBlockWeightUnclamped) && q > 0.0) out.w[i] = out.w[i - 1] * p / q;
  }
  for (int64_t i = 1; i < n_draft; ++i) {
    // Z_i = Σ_x max(0, w_i·p_{i+1}(x) − q_{i+1}(x)); h_i = Z_i / (Z_i + 1 − w_i), 1 on 0/0.
    const auto p = detail::target_row(batch, r, i);
    const auto q = detail::draft_row(batch, r, i);
    double z = 0.0;
    for (int64_t t = 0; t < batch.vocab; ++t) z += std::max(0.0, out.w[i] * p[t] - q[t]);
    const double denominator = z + (1.0 - out.w[i]);
    out.h[i] = denominator > 0.0 ? std::min(1.0, z / denominator) : 1.0;
  }
  if (n_draft > 0) out.h[n_draft] = out.w[n_draft];
  return out;
}

std::vector<uint64_t> block_residual_weights(float weight, std::span<const float> probs_target,
                                             std::span<const float> probs_draft) {
  std::vector<uint64_t> weights(probs_target.size());
  for (size_t t = 0; t < weights.size(); ++t) {
    weights[t] = block_residual_fixed(weight, probs_target[t], probs_draft[t]);
  }
  return weights;
}

namespace {

void verify_request(const ChainBatch& batch, const BlockParams& params, int64_t r,
                    ChainResult& out) {
  const int64_t n_draft = detail::draft_count(batch, r);
  const int64_t g = batch.gamma;
  const BlockWeights weights = block_weights(batch, r);
  RandomAddress address{params.seed, detail::request_id(batch, r), params.step,
                        0,           Purpose::kBlockEta,           0};
  int64_t tau = 0;
  for (int64_t i = 1; i <= n_draft; ++i) {
    address.position = static_cast<uint32_t>(i);
    if (philox_uniform(address) <= weights.h[i]) {
      tau = i;  // the largest passing i
    } else if (mutant(Mutant::kBlockFirstFailure)) {
      break;
    }
  }
  for (int64_t i = 0; i < tau; ++i) {
    out.accept_mask[r * g + i] = 1;
    out.emitted_tokens[r * (g + 1) + i] = batch.draft_tokens[r * g + i];
  }
  out.n_accepted[r] = static_cast<int32_t>(tau);

  const auto p = detail::target_row(batch, r, tau);
  address.position = static_cast<uint32_t>(tau + 1);
  int32_t last = 0;
  if (tau == n_draft) {
    address.purpose = Purpose::kBonusSample;
    if (mutant(Mutant::kBonusWithoutStep)) address.step = 0;
    last = sample_categorical(p, philox_bits(address));
  } else {
    address.purpose = Purpose::kResidualSample;
    const std::vector<uint64_t> residual = block_residual_weights(
        static_cast<float>(weights.w[tau]), p, detail::draft_row(batch, r, tau));
    uint64_t mass = 0;
    for (uint64_t w : residual) mass += w;
    if (mass == 0) {
      out.residual_fallback[r] =
          1;  // rounding only: docs/verifiers.md V5 says sample p and count it
      last = sample_categorical(
          mutant(Mutant::kFallbackFromDraft) ? detail::draft_row(batch, r, tau) : p,
          philox_bits(address));
    } else {
      const uint64_t target = fixed_target(philox_bits(address), mass);
      uint64_t cumulative = 0;
      for (int64_t t = 0; t < batch.vocab; ++t) {
        cumulative += residual[t];
        if (cumulative > target) {
          last = static_cast<int32_t>(t);
          break;
        }
      }
    }
  }
  out.emitted_tokens[r * (g + 1) + tau] = last;
}

}  // namespace

ChainResult verify_block(const ChainBatch& batch, const BlockParams& params) {
  validate_block_batch(batch);
  ChainResult result = detail::make_result(batch, ChainParams{ChainMethod::kToken, 1.0, 0, 0});
  for (int64_t r = 0; r < batch.batch; ++r) verify_request(batch, params, r, result);
  detail::finish_result(result);
  return result;
}

}  // namespace speclab
