// Reference typical acceptance, docs/verifiers.md V4 (Medusa): deterministic pass tests, one
// sampled token.
#include "core/verify/verify_typical.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "core/base/error.hpp"
#include "core/base/mutants.hpp"
#include "core/base/philox.hpp"
#include "core/sampling/sampling.hpp"
#include "core/verify/verify_chain_detail.hpp"

namespace speclab {

double typical_threshold(std::span<const float> probs_target, double epsilon, double delta) {
  double entropy = 0.0;
  for (float value : probs_target) {
    const double p = value;
    entropy -= p * std::log(p + 1e-5);
  }
  return std::min(epsilon, delta * std::exp(-entropy));
}

void validate_typical_params(double epsilon, double delta) {
  if (!(std::isfinite(epsilon) && epsilon > 0.0)) {
    throw InvalidInput(fmt::format(
        "typical epsilon is {}; expected a finite ε > 0 (docs/verifiers.md V4, default {:g})",
        epsilon, kTypicalEpsilon));
  }
  if (!(std::isfinite(delta) && delta > 0.0)) {
    throw InvalidInput(fmt::format(
        "typical delta is {}; expected a finite δ > 0 (docs/verifiers.md V4, default {:g})", delta,
        kTypicalDelta));
  }
}

void validate_typical_batch(const ChainBatch& batch, const TypicalParams& params) {
  validate_typical_params(params.epsilon, params.delta);
  // V4 reads no q: validate as greedy does when probs_draft is absent, as V1 otherwise.
  const ChainMethod shape_method =
      batch.probs_draft.empty() ? ChainMethod::kGreedy : ChainMethod::kToken;
  validate_chain_batch(batch, ChainParams{shape_method, 1.0, 0, 0});
}

ChainResult verify_typical(const ChainBatch& batch, const TypicalParams& params) {
  validate_typical_batch(batch, params);
  ChainResult result = detail::make_result(batch, ChainParams{ChainMethod::kToken, 1.0, 0, 0});
  result.lossy = true;
  const int64_t g = batch.gamma;
  for (int64_t r = 0; r < batch.batch; ++r) {
    const int64_t n_draft = detail::draft_count(batch, r);
    int64_t n = 0;
    // Mutant: one threshold per request, from position 1's row, instead of one per position.
    const double first_threshold =
        mutant(Mutant::kTypicalThresholdOnce)
            ? typical_threshold(detail::target_row(batch, r, 0), params.epsilon, params.delta)
            : 0.0;
    for (; n < n_draft; ++n) {
      const auto p = detail::target_row(batch, r, n);
      const int32_t x = batch.draft_tokens[r * g + n];
      const double threshold = mutant(Mutant::kTypicalThresholdOnce)
                                   ? first_threshold
                                   : typical_threshold(p, params.epsilon, params.delta);
      if (!(static_cast<double>(p[x]) > threshold)) break;
      result.accept_mask[r * g + n] = 1;
      result.emitted_tokens[r * (g + 1) + n] = x;
    }
    result.n_accepted[r] = static_cast<int32_t>(n);
    const RandomAddress address{params.seed,
                                detail::request_id(batch, r),
                                params.step,
                                static_cast<uint32_t>(n + 1),
                                n == n_draft ? Purpose::kBonusSample : Purpose::kResidualSample,
                                0};
    result.emitted_tokens[r * (g + 1) + n] =
        sample_categorical(detail::target_row(batch, r, n), philox_bits(address));
  }
  detail::finish_result(result);
  return result;
}

}  // namespace speclab
