// Plain and speculative decoding engines; see decode.hpp.
#include "core/decode/decode.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>

#include "core/base/error.hpp"
#include "core/base/mutants.hpp"
#include "core/base/philox.hpp"
#include "core/decode/decode_detail.hpp"
#include "core/verify/verify_block.hpp"
#include "core/verify/verify_typical.hpp"

namespace speclab {
void DecodeMetrics::start_positions(int64_t depth) {
  position_reached.assign(depth, 0);
  position_accepted.assign(depth, 0);
  position_offered.assign(depth, 0);
  accepted_length_histogram.assign(depth + 1, 0);
}

void DecodeMetrics::record_step(int64_t drafted, int64_t tested, int64_t n, int64_t emitted,
                                bool residual_fallback) {
  for (int64_t i = 0; i < drafted; ++i) position_offered[i] += 1;
  for (int64_t i = 0; i < tested; ++i) {
    position_reached[i] += 1;
    position_accepted[i] += i < n;
  }
  tested_positions += tested;
  accepted_positions += n;
  accepted_length_histogram[n] += 1;
  residual_fallbacks += residual_fallback;
  steps += 1;
  tokens += emitted;
  step_accepted.push_back(static_cast<int32_t>(std::min(n, emitted)));
  step_emitted.push_back(static_cast<int32_t>(emitted));
  step_drafted.push_back(static_cast<int32_t>(drafted));
}

void DecodeMetrics::record_match_position(std::span<const float> p, std::span<const float> q,
                                          double overlap) {
  const MatchAcceptance a = match_acceptance(p, q, overlap);
  coupled_sum += a.coupled;
  coupled_bound_sum += a.coupled_bound;
  sampled_match_sum += a.sampled_match;
}

namespace detail {

double now_seconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

}  // namespace detail

void validate_decode_config(const DecodeConfig& config,
                            std::span<const std::vector<int32_t>> prompts, int64_t vocab,
                            bool speculative) {
  if (prompts.empty()) throw InvalidInput("prompts is empty; expected at least one request");
  if (config.max_new_tokens < 1) {
    throw InvalidInput(
        fmt::format("decode.max_new_tokens is {}; expected ≥ 1", config.max_new_tokens));
  }
  if (speculative && config.gamma < 0) {
    throw InvalidInput(fmt::format("decode.gamma is {}; expected γ ≥ 0", config.gamma));
  }
  validate_sampling_params(config.sampling);
  validate_sampling_params(config.draft_sampling);
  if (!config.request_ids.empty()) {
    if (config.request_ids.size() != prompts.size()) {
      throw InvalidInput(
          fmt::format("decode.request_ids has {} ids for {} prompts; expected one "
                      "per prompt (or none: prompt b is request b)",
                      config.request_ids.size(), prompts.size()));
    }
    std::vector<uint32_t> sorted = config.request_ids;
    std::sort(sorted.begin(), sorted.end());
    const auto twin = std::adjacent_find(sorted.begin(), sorted.end());
    if (twin != sorted.end()) {
      throw InvalidInput(fmt::format(
          "decode.request_ids gives id {} to two prompts; expected distinct ids (two requests "
          "with one id would draw the same random numbers)",
          *twin));
    }
  }
  if (!config.generated.empty()) {
    if (config.generated.size() != prompts.size()) {
      throw InvalidInput(fmt::format(
          "decode.generated has {} counts for {} prompts; expected one per prompt (or none)",
          config.generated.size(), prompts.size()));
    }
    for (size_t b = 0; b < prompts.size(); ++b) {
      const int64_t g = config.generated[b];
      if (g < 0 || g >= config.max_new_tokens) {
        throw InvalidInput(
            fmt::format("decode.generated[{}] is {}; expected 0 ≤ generated < max_new_tokens = {} "
                        "(a finished request is not resumed)",
                        b, g, config.max_new_tokens));
      }
    }
  }
  const auto* match = std::get_if<MatchVerifier>(&config.verifier);
  if (speculative && match != nullptr) {
    validate_match_sampling(match->method, config.token_sampling(), "decode.sampling");
  }
  for (size_t b = 0; b < prompts.size(); ++b) {
    if (prompts[b].empty()) {
      throw InvalidInput(fmt::format("prompt {} is empty; expected at least one token", b));
    }
    for (size_t i = 0; i < prompts[b].size(); ++i) {
      if (prompts[b][i] < 0 || prompts[b][i] >= vocab) {
        throw InvalidInput(fmt::format("prompt {} token {} is {}; expected a token id in [0, {})",
                                       b, i, prompts[b][i], vocab));
      }
    }
  }
}

namespace detail {

// β = Σ_x min(p(x), q(x)): the acceptance probability at a position (docs/verifiers.md V1).
double overlap(const float* p, const float* q, int64_t v) {
  float beta = 0.0f;  // reassociated (vectorised); the metric needs no more than float accuracy
#pragma omp simd reduction(+ : beta)
  for (int64_t t = 0; t < v; ++t) beta += p[t] < q[t] ? p[t] : q[t];
  return beta;
}

// Appends tokens to a request, stopping after EOS; returns how many were appended.
int64_t append_until_eos(std::vector<int32_t>& out, std::span<const int32_t> tokens, int32_t eos,
                         bool& finished) {
  int64_t n = 0;
  for (int32_t t : tokens) {
    if (t < 0) break;  // padding: the verifier emitted fewer tokens
    out.push_back(t);
    ++n;
    if (t == eos) {
      finished = true;
      break;
    }
  }
  return n;
}

void check_same_vocabulary(const LanguageModel& target, const LanguageModel& draft) {
  if (target.vocab() != draft.vocab()) {
    throw InvalidInput(fmt::format(
        "draft {} has vocabulary size {} but target {} has {}; a draft of another vocabulary "
        "decodes with verifier tli, slem or slrs",
        draft.name(), draft.vocab(), target.name(), target.vocab()));
  }
}

ModelStats stats_since(ModelStats after, const ModelStats& before) {
  after.calls -= before.calls;
  after.sequences -= before.sequences;
  after.positions -= before.positions;
  after.seconds -= before.seconds;
  return after;
}

void prefill_prompts(std::span<LanguageModel* const> models,
                     std::span<const std::vector<int32_t>> prompts, DecodeMetrics& m) {
  m.request_prefill_seconds.assign(prompts.size(), 0.0);
  m.request_decode_seconds.assign(prompts.size(), 0.0);
  for (size_t b = 0; b < prompts.size(); ++b) {
    const ScoreRequest request{prompts[b], 1, static_cast<int64_t>(b)};
    const double start = now_seconds();
    for (LanguageModel* model : models)
      m.prefill_positions += model->prefill(std::span(&request, 1));
    m.request_prefill_seconds[b] = now_seconds() - start;
    m.prompt_tokens += static_cast<int64_t>(prompts[b].size());
  }
}

SpeculativeRun::SpeculativeRun(LanguageModel& target, LanguageModel& draft,
                               std::span<const std::vector<int32_t>> prompts,
                               const DecodeConfig& config, int64_t depth)
    : target_(target),
      draft_(draft),
      max_new_tokens_(config.max_new_tokens),
      sequences_(prompts.begin(), prompts.end()),
      finished_(prompts.size(), 0) {
  result_.tokens.resize(prompts.size());
  for (size_t b = 0; b < prompts.size(); ++b) {
    generated_before_.push_back(config.generated_before(static_cast<int64_t>(b)));
  }
  DecodeMetrics& m = result_.metrics;
  m.requests = static_cast<int64_t>(prompts.size());
  LanguageModel* const models[] = {&target, &draft};
  prefill_prompts(models, prompts, m);
  target_before_ = target.stats();
  draft_before_ = draft.stats();
  start_ = now_seconds();
  m.start_positions(depth);
}

std::vector<int64_t> SpeculativeRun::active() const {
  std::vector<int64_t> active;
  for (size_t b = 0; b < finished_.size(); ++b) {
    if (!finished_[b]) active.push_back(static_cast<int64_t>(b));
  }
  return active;
}

int64_t SpeculativeRun::tokens_left(int64_t b) const {
  return max_new_tokens_ - output_position(b);
}

int64_t SpeculativeRun::output_position(int64_t b) const {
  return generated_before_[b] + static_cast<int64_t>(result_.tokens[b].size());
}

void SpeculativeRun::commit(int64_t b, int64_t drafted, int64_t n, std::span<const double> betas,
                            bool residual_fallback, std::span<const int32_t> emitted,
                            int64_t models_hold) {
  DecodeMetrics& m = result_.metrics;
  for (const double beta : betas) m.alpha_sum_min += beta;

  std::vector<int32_t>& seq = sequences_[b];
  const int64_t verified = static_cast<int64_t>(seq.size());
  bool eos = false;
  const int64_t appended = append_until_eos(seq, emitted.first(n + 1), target_.eos_token(), eos);
  result_.tokens[b].insert(result_.tokens[b].end(), seq.end() - appended, seq.end());
  // The verified length, not the new one: at position `verified + n` the models hold the rejected
  // draft x_{n+1} (or nothing), not the token emitted there, and a model may reuse whatever a
  // truncate leaves without looking (LanguageModel::truncate, core/models/model.hpp).
  const int64_t keep = verified + std::min({models_hold, n, appended});
  target_.truncate(b, keep);
  draft_.truncate(b, keep);
  finished_[b] = eos || tokens_left(b) <= 0;
  if (finished_[b]) m.request_decode_seconds[b] = now_seconds() - start_ - metric_seconds_;
  m.record_step(drafted, static_cast<int64_t>(betas.size()), n, appended, residual_fallback);
}

DecodeResult SpeculativeRun::finish() {
  for (size_t b = 0; b < sequences_.size(); ++b) {
    target_.release(static_cast<int64_t>(b));
    draft_.release(static_cast<int64_t>(b));
  }
  DecodeMetrics& m = result_.metrics;
  m.target = stats_since(target_.stats(), target_before_);
  m.draft = stats_since(draft_.stats(), draft_before_);
  m.decode_seconds = now_seconds() - start_ - metric_seconds_;
  return std::move(result_);
}

}  // namespace detail

namespace {
using namespace detail;

// One verification step of a draft chain with the configured chain-shaped verifier; a match
// verifier draws the target's tokens by plain decoding's rule.
ChainResult verify_step(const ChainBatch& chain, const DecodeConfig& config, uint32_t step) {
  if (const auto* match = std::get_if<MatchVerifier>(&config.verifier)) {
    MatchVerifier spec = *match;
    spec.sampling = config.token_sampling();
    return verify(spec, chain, config.seed, step);
  }
  return verify(config.verifier, chain, config.seed, step);
}

}  // namespace

DecodeResult plain_decode(LanguageModel& model, std::span<const std::vector<int32_t>> prompts,
                          const DecodeConfig& config) {
  validate_decode_config(config, prompts, model.vocab(), false);
  const int64_t batch = static_cast<int64_t>(prompts.size()), v = model.vocab();
  DecodeResult result;
  result.tokens.resize(batch);
  std::vector<std::vector<int32_t>> seqs(prompts.begin(), prompts.end());
  std::vector<uint8_t> finished(batch, 0);
  DecodeMetrics& m = result.metrics;
  m.requests = batch;
  LanguageModel* const models[] = {&model};
  prefill_prompts(models, prompts, m);
  const auto stats_before = model.stats();
  const double start = now_seconds();
  for (int64_t t = 0; t < config.max_new_tokens; ++t) {
    std::vector<ScoreRequest> requests;
    std::vector<int64_t> active;
    for (int64_t b = 0; b < batch; ++b) {
      if (finished[b]) continue;
      active.push_back(b);
      requests.push_back({seqs[b], 1, b});
    }
    if (active.empty()) break;
    const std::vector<float> probs = model.score(requests, config.sampling);
    for (size_t k = 0; k < active.size(); ++k) {
      const int64_t b = active[k];
      // Mutant: the token index dropped from the address, so a request reuses one uniform.
      const int64_t position =
          config.generated_before(b) + static_cast<int64_t>(result.tokens[b].size());
      const uint32_t index =
          mutant(Mutant::kPlainUniformWithoutIndex) ? 0u : static_cast<uint32_t>(position);
      const int32_t token =
          sample_output_token(std::span<const float>(probs).subspan(k * v, v),
                              config.token_sampling(), config.seed, config.request_id(b), index);
      bool done = false;
      append_until_eos(seqs[b], std::span<const int32_t>(&token, 1), model.eos_token(), done);
      result.tokens[b].push_back(token);
      finished[b] =
          done || config.generated_before(b) + static_cast<int64_t>(result.tokens[b].size()) >=
                      config.max_new_tokens;
      if (finished[b]) m.request_decode_seconds[b] = now_seconds() - start;
      m.steps += 1;
      m.tokens += 1;
      m.step_accepted.push_back(0);
      m.step_emitted.push_back(1);
      m.step_drafted.push_back(0);
    }
  }
  for (int64_t b = 0; b < batch; ++b) model.release(b);
  m.target = stats_since(model.stats(), stats_before);
  m.decode_seconds = now_seconds() - start;
  return result;
}

DecodeResult speculative_decode(LanguageModel& target, LanguageModel& draft,
                                std::span<const std::vector<int32_t>> prompts,
                                const DecodeConfig& config) {
  if (std::holds_alternative<TreeVerifier>(config.verifier)) {
    return tree_speculative_decode(target, draft, prompts, config);
  }
  check_same_vocabulary(target, draft);
  validate_decode_config(config, prompts, target.vocab(), true);
  const int64_t v = target.vocab();
  const int64_t gamma = config.gamma;
  SpeculativeRun run(target, draft, prompts, config, gamma);
  DecodeMetrics& m = run.metrics();
  const VerifierEntry& entry = entry_of(config.verifier);
  // coupled: each draft token drawn with the noise of its output position (mutant: with the
  // draft's own uniform, as the other verifiers draft).
  const bool output_noise =
      entry.draft_rule == DraftRule::kOutputNoise && !mutant(Mutant::kCoupledFreshDraftNoise);
  const bool match = entry.family == VerifierFamily::kMatch;

  std::vector<float> probs_draft, probs_target, scattered;
  std::vector<int32_t> draft_tokens;
  for (uint32_t step = config.first_step;; ++step) {
    const std::vector<int64_t> active = run.active();
    if (active.empty()) break;
    const int64_t n_active = static_cast<int64_t>(active.size());
    // The id that addresses each slot's draws and verification (mutant: the slot itself).
    std::vector<uint32_t> request_ids;
    for (int64_t k = 0; k < n_active; ++k) {
      request_ids.push_back(mutant(Mutant::kChainSlotNoise) ? static_cast<uint32_t>(k)
                                                            : config.request_id(active[k]));
    }
    std::vector<int32_t> n_draft(n_active);
    int64_t max_draft = 0;
    for (int64_t k = 0; k < n_active; ++k) {
      const int64_t left = run.tokens_left(active[k]);
      n_draft[k] = static_cast<int32_t>(std::min(gamma, left - 1));
      max_draft = std::max<int64_t>(max_draft, n_draft[k]);
    }

    // Draft phase: γ_b autoregressive draft steps, each one draft call over the requests that
    // still draft; x_i ~ q_i with the kDraftSample uniform at position i.
    // Buffers live across steps: rows past a request's γ_b are padding the verifier never reads,
    // so they need no clearing.
    probs_draft.resize(n_active * gamma * v);
    draft_tokens.assign(n_active * gamma, 0);
    for (int64_t i = 0; i < max_draft; ++i) {
      std::vector<ScoreRequest> requests;
      std::vector<int64_t> who;
      for (int64_t k = 0; k < n_active; ++k) {
        if (n_draft[k] <= i) continue;
        who.push_back(k);
        requests.push_back({run.sequence(active[k]), 1, active[k]});
      }
      const std::vector<float> q = draft.score(requests, config.draft_sampling);
      // Mutant: verify against the draft's T = 1 distribution, not the one it sampled from.
      const std::vector<float> q_verify = mutant(Mutant::kDraftWarpingMismatch)
                                              ? draft.score(requests, SamplingParams{})
                                              : std::vector<float>{};
      const std::vector<float>& q_rows = q_verify.empty() ? q : q_verify;
      for (size_t j = 0; j < who.size(); ++j) {
        const int64_t k = who[j], b = active[k];
        std::copy_n(&q_rows[j * v], v, &probs_draft[(k * gamma + i) * v]);
        const RandomAddress a{config.seed,
                              request_ids[k],
                              step,
                              static_cast<uint32_t>(i + 1),
                              Purpose::kDraftSample,
                              0};
        const std::span<const float> q_row(&q[j * v], v);
        const int32_t x = output_noise
                              ? sample_gumbel(q_row, config.seed, request_ids[k],
                                              match_noise_position(run.output_position(b), i))
                              : sample_categorical(q_row, philox_bits(a));
        draft_tokens[k * gamma + i] = x;
        run.sequence(b).push_back(x);  // drafted tokens extend the sequence until verified
      }
    }

    // Target phase: one call over γ_b + 1 positions per request.
    std::vector<ScoreRequest> requests;
    for (int64_t k = 0; k < n_active; ++k) {
      requests.push_back({run.sequence(active[k]), n_draft[k] + 1, active[k]});
    }
    // The target's rows come back packed (γ_b + 1 per request); when every request drafted the
    // full γ that is already the [B, γ+1, V] layout, otherwise they are spread into it.
    const bool packed =
        std::all_of(n_draft.begin(), n_draft.end(), [&](int32_t n) { return n == gamma; });
    probs_target.resize(total_positions(requests) * v);
    target.score(requests, config.sampling, probs_target);
    if (!packed) {
      scattered.resize(n_active * (gamma + 1) * v);
      int64_t row = 0;
      for (int64_t k = 0; k < n_active; ++k) {
        for (int64_t i = 0; i <= n_draft[k]; ++i, ++row) {
          std::copy_n(&probs_target[row * v], v, &scattered[(k * (gamma + 1) + i) * v]);
        }
      }
      probs_target.swap(scattered);
    }

    std::vector<int64_t> positions(n_active);
    for (int64_t k = 0; k < n_active; ++k) positions[k] = run.output_position(active[k]);
    const ChainBatch chain{n_active,     gamma,   v,           probs_target, probs_draft,
                           draft_tokens, n_draft, request_ids, positions};
    const double verify_start = now_seconds();
    const ChainResult verdict = verify_step(chain, config, step);
    m.verify_seconds += now_seconds() - verify_start;

    for (int64_t k = 0; k < n_active; ++k) {
      const int64_t b = active[k];
      const int64_t n = verdict.n_accepted[k];
      std::vector<double> betas(std::min<int64_t>(n + 1, n_draft[k]));
      for (size_t i = 0; i < betas.size(); ++i) {
        const float* p = &probs_target[(k * (gamma + 1) + i) * v];
        const float* q = &probs_draft[(k * gamma + i) * v];
        betas[i] = overlap(p, q, v);
        // The match verifiers' own acceptance at the position beside V1's β, off the clock.
        if (match) {
          const double metric_start = now_seconds();
          m.record_match_position(std::span(p, v), std::span(q, v), betas[i]);
          run.add_metric_seconds(now_seconds() - metric_start);
        }
      }
      // Roll the sequence back to its verified prefix; commit appends the step's tokens.
      run.sequence(b).resize(run.sequence(b).size() - n_draft[k]);
      run.commit(
          b, n_draft[k], n, betas, verdict.residual_fallback[k] != 0,
          std::span<const int32_t>(verdict.emitted_tokens).subspan(k * (gamma + 1), gamma + 1), n);
    }
  }
  return run.finish();
}

}  // namespace speclab
