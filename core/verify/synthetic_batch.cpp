// Synthetic verification batches (see synthetic_batch.hpp).
#include "core/verify/synthetic_batch.hpp"

#include <algorithm>
#include <cmath>

#include "core/base/error.hpp"
#include "core/base/philox.hpp"
#include "core/sampling/sampling.hpp"

namespace speclab {
namespace {

// A standard normal from two Philox words (Box-Muller), addressed by (seed; row, token).
double gaussian(uint64_t seed, uint32_t row, uint32_t token, uint32_t stream) {
  r123::Philox4x32 rng;
  const auto out = rng({{row, token, stream, 0x9a55u}},
                       {{static_cast<uint32_t>(seed), static_cast<uint32_t>(seed >> 32)}});
  const double u1 = uniform_from_bits(out[0]);
  const double u2 = uniform_from_bits(out[1]);
  return std::sqrt(-2.0 * std::log(u1)) * std::cos(6.283185307179586 * u2);
}

void softmax_row(std::vector<double>& logits, float* out) {
  const double m = *std::max_element(logits.begin(), logits.end());
  double total = 0.0;
  for (double& x : logits) total += (x = std::exp(x - m));
  for (size_t t = 0; t < logits.size(); ++t) out[t] = static_cast<float>(logits[t] / total);
}

}  // namespace

ChainBatchData make_synthetic_batch(const SyntheticBatchParams& params) {
  if (params.batch < 1 || params.gamma < 0 || params.vocab < 1) {
    throw InvalidInput("synthetic batch needs B ≥ 1, γ ≥ 0, V ≥ 1");
  }
  ChainBatchData d;
  d.batch = params.batch;
  d.gamma = params.gamma;
  d.vocab = params.vocab;
  const int64_t v = params.vocab;
  d.probs_target.resize(params.batch * (params.gamma + 1) * v);
  d.probs_draft.resize(params.batch * params.gamma * v);
  d.draft_tokens.resize(params.batch * params.gamma);
  std::vector<double> logits(v), draft_logits(v);
  for (int64_t r = 0; r < params.batch; ++r) {
    for (int64_t i = 0; i <= params.gamma; ++i) {
      const auto row = static_cast<uint32_t>(r * (params.gamma + 1) + i);
      for (int64_t t = 0; t < v; ++t) {
        logits[t] = params.target_scale * gaussian(params.seed, row, static_cast<uint32_t>(t), 0);
        draft_logits[t] = logits[t] + params.draft_noise *
                                          gaussian(params.seed, row, static_cast<uint32_t>(t), 1);
      }
      softmax_row(logits, &d.probs_target[row * v]);
      if (i == params.gamma) continue;
      float* q = &d.probs_draft[(r * params.gamma + i) * v];
      softmax_row(draft_logits, q);
      const RandomAddress a{params.seed,
                            static_cast<uint32_t>(r),
                            0,
                            static_cast<uint32_t>(i + 1),
                            Purpose::kDraftSample,
                            0};
      d.draft_tokens[r * params.gamma + i] =
          sample_categorical({q, static_cast<size_t>(v)}, philox_bits(a));
    }
  }
  return d;
}

std::vector<double> acceptance_rates(const ChainBatchData& d) {
  std::vector<double> beta(d.batch * d.gamma);
  for (int64_t r = 0; r < d.batch; ++r) {
    for (int64_t i = 0; i < d.gamma; ++i) {
      const float* p = &d.probs_target[(r * (d.gamma + 1) + i) * d.vocab];
      const float* q = &d.probs_draft[(r * d.gamma + i) * d.vocab];
      double s = 0.0;
      for (int64_t t = 0; t < d.vocab; ++t) s += std::min(p[t], q[t]);
      beta[r * d.gamma + i] = s;
    }
  }
  return beta;
}

}  // namespace speclab
