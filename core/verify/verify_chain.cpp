// Reference chain verifiers V1-V3 (docs/verifiers.md): written to be obviously correct, not fast.
// The fast path in verify_chain_fast.cpp must return the same tokens for the same uniforms.
#include "core/verify/verify_chain.hpp"

#include <fmt/format.h>

#include "core/base/error.hpp"
#include "core/base/mutants.hpp"
#include "core/base/philox.hpp"
#include "core/base/rules.hpp"
#include "core/sampling/sampling.hpp"
#include "core/verify/verify_chain_detail.hpp"

namespace speclab {

namespace detail {

ChainResult make_result(const ChainBatch& batch, const ChainParams& params) {
  ChainResult result;
  result.batch = batch.batch;
  result.gamma = batch.gamma;
  result.emitted_tokens.assign(batch.batch * (batch.gamma + 1), -1);
  result.n_accepted.assign(batch.batch, 0);
  result.accept_mask.assign(batch.batch * batch.gamma, 0);
  result.residual_fallback.assign(batch.batch, 0);
  result.lossy = is_lossy(params.method);
  return result;
}

void finish_result(ChainResult& result) {
  result.residual_fallbacks = 0;
  for (uint8_t f : result.residual_fallback) result.residual_fallbacks += f;
}

}  // namespace detail

namespace {

void check_size(std::string_view argument, size_t actual, int64_t expected,
                std::string_view formula) {
  if (static_cast<int64_t>(actual) != expected) {
    throw InvalidInput(
        fmt::format("{} has {} values; expected {} = {}", argument, actual, formula, expected));
  }
}

}  // namespace

void validate_chain_index_sizes(const ChainBatch& batch) {
  if (batch.batch < 1) {
    throw InvalidInput(
        fmt::format("batch size B is {}; expected at least one request", batch.batch));
  }
  if (batch.gamma < 0) {
    throw InvalidInput(fmt::format("gamma is {}; expected γ ≥ 0", batch.gamma));
  }
  if (batch.vocab < 1) {
    throw InvalidInput(fmt::format("vocab size V is {}; expected V ≥ 1", batch.vocab));
  }
  const int64_t b = batch.batch, g = batch.gamma;
  check_size("draft_tokens", batch.draft_tokens.size(), b * g,
             fmt::format("B·γ with B={}, γ={}", b, g));
  if (!batch.n_draft.empty()) check_size("n_draft", batch.n_draft.size(), b, "B");
  if (!batch.request_ids.empty()) check_size("request_ids", batch.request_ids.size(), b, "B");
}

void validate_chain_params(const ChainParams& params) {
  if (params.method == ChainMethod::kLenient && !(params.leniency > 0.0 && params.leniency <= 1.0 &&
                                                  static_cast<float>(params.leniency) > 0.0f)) {
    throw InvalidInput(fmt::format("leniency is {}; expected 0 < leniency ≤ 1 (1 is lossless V1)",
                                   params.leniency));
  }
}

void validate_chain_sizes(const ChainBatch& batch, const ChainParams& params) {
  validate_chain_index_sizes(batch);
  const int64_t b = batch.batch, g = batch.gamma, v = batch.vocab;
  check_size("probs_target", batch.probs_target.size(), b * (g + 1) * v,
             fmt::format("B·(γ+1)·V with B={}, γ={}, V={}", b, g, v));
  if (!(params.method == ChainMethod::kGreedy && batch.probs_draft.empty())) {
    check_size("probs_draft", batch.probs_draft.size(), b * g * v,
               fmt::format("B·γ·V with B={}, γ={}, V={}", b, g, v));
  }
  validate_chain_params(params);
}

void validate_chain_shapes(const ChainBatch& batch, const ChainParams& params) {
  validate_chain_sizes(batch, params);
  const int64_t b = batch.batch, g = batch.gamma, v = batch.vocab;
  for (int64_t r = 0; r < b && !batch.n_draft.empty(); ++r) {
    const int32_t n = batch.n_draft[r];
    if (n < 0 || n > g) {
      throw InvalidInput(
          fmt::format("n_draft[{}] (request {}) is {}; expected 0 ≤ n_draft ≤ γ = {}", r, r, n, g));
    }
  }
  for (int64_t r = 0; r < b; ++r) {
    const int64_t n = detail::draft_count(batch, r);
    for (int64_t i = 0; i < n; ++i) {
      const int32_t x = batch.draft_tokens[r * g + i];
      if (x < 0 || x >= v) {
        throw InvalidInput(fmt::format(
            "draft_tokens[{}, {}] (request {}, position {}) is {}; expected a token id in [0, {})",
            r, i, r, i + 1, x, v));
      }
    }
  }
}

namespace detail {

void check_drafted_from_q(float prob_draft, int32_t token, int64_t r, int64_t i, int64_t gamma) {
  if (drafted_from(prob_draft)) return;
  throw InvalidInput(fmt::format(
      "draft_tokens[{}, {}] (request {}, position {}) is {}, which has probability 0 in its own "
      "probs_draft row {}; a draft token must be drawn from the q it is verified against (is "
      "probs_draft the distribution the draft sampled from, after the same temperature and "
      "filters?)",
      r, i, r, i + 1, token, r * gamma + i));
}

}  // namespace detail

void validate_chain_batch(const ChainBatch& batch, const ChainParams& params) {
  validate_chain_shapes(batch, params);
  const int64_t g = batch.gamma;
  for (int64_t r = 0; r < batch.batch; ++r) {
    const int64_t n = detail::draft_count(batch, r);
    for (int64_t i = 0; i <= n; ++i) {
      validate_probability_row(detail::target_row(batch, r, i),
                               {"probs_target", r * (g + 1) + i, r, i + 1});
    }
    if (params.method == ChainMethod::kGreedy) continue;
    for (int64_t i = 0; i < n; ++i) {
      validate_probability_row(detail::draft_row(batch, r, i),
                               {"probs_draft", r * g + i, r, i + 1});
      const int32_t x = batch.draft_tokens[r * g + i];
      detail::check_drafted_from_q(detail::draft_row(batch, r, i)[x], x, r, i, g);
    }
  }
}

namespace {

// Inverse-CDF sampling over fixed-point weights (core/base/rules.hpp), as sample_categorical does.
int32_t sample_fixed(const std::vector<uint64_t>& weights, uint32_t bits) {
  uint64_t total = 0;
  for (uint64_t w : weights) total += w;
  const uint64_t target = fixed_target(bits, total);
  uint64_t cumulative = 0;
  for (size_t i = 0; i < weights.size(); ++i) {
    cumulative += weights[i];
    if (cumulative > target) return static_cast<int32_t>(i);
  }
  return static_cast<int32_t>(weights.size()) - 1;
}

void verify_request_reference(const ChainBatch& batch, const ChainParams& params, int64_t r,
                              ChainResult& out) {
  const int64_t n_draft = detail::draft_count(batch, r);
  const int64_t g = batch.gamma;
  RandomAddress address{params.seed, detail::request_id(batch, r), params.step,
                        0,           Purpose::kAcceptTest,         0};
  int64_t n = 0;
  for (; n < n_draft; ++n) {
    const int32_t x = batch.draft_tokens[r * g + n];
    const auto p = detail::target_row(batch, r, n);
    bool accepted = false;
    if (params.method == ChainMethod::kGreedy) {
      accepted = x == argmax_lowest(p);
    } else {
      const auto q = detail::draft_row(batch, r, n);
      address.position = mutant(Mutant::kReusedUniform) ? 1u : static_cast<uint32_t>(n + 1);
      address.purpose = Purpose::kAcceptTest;
      const double u = philox_uniform(address);
      accepted = params.method == ChainMethod::kToken
                     ? token_accepts(u, q[x], p[x])
                     : lenient_accepts(u, static_cast<float>(params.leniency), q[x], p[x]);
    }
    if (!accepted) break;
    out.accept_mask[r * g + n] = 1;
    out.emitted_tokens[r * (g + 1) + n] = x;
  }
  out.n_accepted[r] = static_cast<int32_t>(n);

  // One more token at position n+1: argmax (V2), bonus from p_{γ+1}, or the residual.
  const auto p = detail::target_row(batch, r, n);
  address.position = static_cast<uint32_t>(n + 1);
  int32_t last = 0;
  if (params.method == ChainMethod::kGreedy) {
    last = argmax_lowest(p);
  } else if (n == n_draft) {
    if (mutant(Mutant::kMissingBonus) && n > 0) return;
    address.purpose = Purpose::kBonusSample;
    if (mutant(Mutant::kBonusWithoutStep)) address.step = 0;
    last = sample_categorical(p, philox_bits(address));
  } else {
    address.purpose = Purpose::kResidualSample;
    const float leniency =
        params.method == ChainMethod::kLenient ? static_cast<float>(params.leniency) : 1.0f;
    const std::vector<uint64_t> residual =
        chain_residual_weights(p, detail::draft_row(batch, r, n), leniency);
    uint64_t mass = 0;
    for (uint64_t w : residual) mass += w;
    if (mass == 0) {
      // Rounding left no residual mass although a rejection happened: docs/verifiers.md V1 says
      // sample p and count the event.
      out.residual_fallback[r] = 1;
      // Mutant: the fallback drawn from q.
      last = sample_categorical(
          mutant(Mutant::kFallbackFromDraft) ? detail::draft_row(batch, r, n) : p,
          philox_bits(address));
    } else {
      last = sample_fixed(residual, philox_bits(address));
    }
  }
  out.emitted_tokens[r * (g + 1) + n] = last;
  if (mutant(Mutant::kAcceptedOffByOne) && n < n_draft) {
    out.accept_mask[r * g + n] = 1;
    out.emitted_tokens[r * (g + 1) + n] = batch.draft_tokens[r * g + n];
    out.emitted_tokens[r * (g + 1) + n + 1] = last;
    out.n_accepted[r] = static_cast<int32_t>(n + 1);
  }
}

}  // namespace

std::vector<uint64_t> chain_residual_weights(std::span<const float> probs_target,
                                             std::span<const float> probs_draft, float leniency) {
  std::vector<uint64_t> weights(probs_target.size());
  for (size_t t = 0; t < weights.size(); ++t) {
    weights[t] = mutant(Mutant::kResidualFromTarget)
                     ? to_fixed(probs_target[t])
                     : residual_fixed(probs_target[t], probs_draft[t], leniency);
  }
  return weights;
}

ChainResult verify_chain_reference(const ChainBatch& batch, const ChainParams& params) {
  validate_chain_batch(batch, params);
  ChainResult result = detail::make_result(batch, params);
  for (int64_t r = 0; r < batch.batch; ++r) verify_request_reference(batch, params, r, result);
  detail::finish_result(result);
  return result;
}

}  // namespace speclab
