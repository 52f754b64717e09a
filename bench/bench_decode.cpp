// `speclab bench decode`: measured speculative-decoding speedup for a model pair, beside the
// closed forms of docs/verifiers.md V1 (E = (1 − α^{γ+1})/(1 − α), Leviathan's gain E/(γc + 1)) and
// the planner's finite-run prediction from the run's own costs (core/plan/cost_model.hpp
// predict_run).
#include <fmt/format.h>

#include <cmath>
#include <cstdio>
#include <optional>
#include <string>

#include "bench/benches.hpp"
#include "bench/contention.hpp"
#include "bench/prompts.hpp"
#include "core/base/error.hpp"
#include "core/decode/decode.hpp"
#include "core/io/json.hpp"
#include "core/models/model_registry.hpp"
#include "core/models/synthetic_draft.hpp"
#include "core/plan/cost_model.hpp"
#include "core/probe/machine.hpp"
#include "experiments/run_costs.hpp"

namespace speclab::cli {
namespace {

struct Row {
  int64_t gamma = 0;
  double alpha = 0, alpha_sum_min = 0, emitted_per_step = 0, emitted_formula = 0;
  double speedup = 0, speedup_predicted = 0, speedup_leviathan = 0, c = 0, tokens_per_s = 0;
  double target_ratio = 0, overhead = 0;
  int64_t tokens = 0, eos = 0;  // generated in all; requests that stopped at EOS
};

double per_call(const ModelStats& s) { return s.calls ? s.seconds / s.calls : 0.0; }

// Requests of a run that ended with the target's EOS token.
int64_t stopped_at_eos(const DecodeResult& r, int32_t eos) {
  int64_t n = 0;
  for (const auto& tokens : r.tokens) n += !tokens.empty() && tokens.back() == eos;
  return n;
}

}  // namespace

void run_bench_decode(const BenchDecodeOptions& o) {
  if (o.tokens < 2 || o.batch < 1 || o.gamma.empty() || o.contend < 0) {
    throw InvalidInput(
        fmt::format("bench decode needs --tokens ≥ 2, --batch ≥ 1, at least one --gamma and "
                    "--contend ≥ 0 (got {}, {}, {}, {})",
                    o.tokens, o.batch, o.gamma.size(), o.contend));
  }
  for (int64_t g : o.gamma) {
    if (g < 1) throw InvalidInput(fmt::format("--gamma value {} must be ≥ 1", g));
  }
  auto target = make_model(o.target);
  DecodeConfig config{.max_new_tokens = o.tokens,
                      .sampling = {.temperature = o.temperature},
                      .draft_sampling = {.temperature = o.temperature},
                      .seed = o.seed};
  // A synthetic draft at T = 0 would be one-hot; it drafts at T = 1 from its constructed rows.
  if (is_synthetic_draft(o.draft)) config.draft_sampling = {};
  auto draft = make_draft_model(o.draft, o.target, config.sampling, config.draft_sampling);
  if (target->vocab() != draft->vocab()) {
    throw InvalidInput(fmt::format("draft {} has vocabulary size {} but target {} has {}",
                                   draft->name(), draft->vocab(), target->name(), target->vocab()));
  }
  const BenchPrompts made =
      bench_prompts({o.target, o.batch, o.tokens, o.seed, o.workload, o.prompt}, *target);
  const auto& prompts = made.tokens;
  // Warm caches and lazily built weights before timing.
  DecodeConfig warm = config;
  warm.max_new_tokens = 4;
  plain_decode(*target, prompts, warm);
  speculative_decode(*target, *draft, prompts, warm);

  std::optional<CompetingLoad> load;
  if (o.contend > 0) load.emplace(o.contend);
  // Every engine runs the prompt pass before its decode clock starts (DecodeMetrics), as
  // llama.cpp's decode rate leaves the prompt out; the prompt rate is reported apart.
  const DecodeResult plain = plain_decode(*target, prompts, config);
  // Positions the prompt pass computed per second; a target without per-sequence state
  // (LinearSoftmax) computes none: NaN.
  const DecodeMetrics& p = plain.metrics;
  const double prompt_rate =
      p.prefill_positions > 0 ? p.prefill_positions / p.prefill_seconds() : std::nan("");
  const double plain_seconds = plain.metrics.decode_seconds;
  const double plain_rate = plain.metrics.tokens / plain_seconds;
  const double target_step = per_call(plain.metrics.target);
  const double plain_step = experiments::measured_plain_step(plain.metrics);
  const int64_t plain_eos = stopped_at_eos(plain, target->eos_token());

  std::vector<Row> rows;
  for (int64_t gamma : o.gamma) {
    config.gamma = gamma;
    const DecodeResult spec = speculative_decode(*target, *draft, prompts, config);
    const DecodeMetrics& m = spec.metrics;
    Row row;
    row.gamma = gamma;
    row.alpha = m.acceptance_rate();
    row.alpha_sum_min = m.alpha_estimate();
    row.tokens = m.tokens;
    row.eos = stopped_at_eos(spec, target->eos_token());
    // Emitted per step over the steps that drafted the full γ (the last steps of a request
    // draft fewer so as not to overshoot --tokens).
    int64_t full_steps = 0, full_emitted = 0;
    for (size_t s = 0; s < m.step_drafted.size(); ++s) {
      if (m.step_drafted[s] != gamma) continue;
      ++full_steps;
      full_emitted += m.step_emitted[s];
    }
    row.emitted_per_step = full_steps ? static_cast<double>(full_emitted) / full_steps : 0.0;
    const double a = row.alpha;
    row.emitted_formula = a < 1.0 ? (1.0 - std::pow(a, gamma + 1)) / (1.0 - a) : gamma + 1.0;
    row.tokens_per_s = m.tokens / m.decode_seconds;
    row.speedup = row.tokens_per_s / plain_rate;
    // The planner's finite run (predict_run) priced with this run's own costs: the plain step,
    // and per round the drafting, the verification call and the time outside the calls
    // (sampling the drafts, verifying, bookkeeping). Its terms c, r, o are in plain steps.
    const MeasuredRoundCosts costs({{.batch = o.batch,
                                     .plain_step = plain_step,
                                     .rounds = {experiments::measured_round(m, gamma)}}});
    const RunPrediction prediction = predict_run(costs, a, o.batch, gamma, o.tokens);
    row.c = prediction.c;
    row.target_ratio = prediction.r;
    row.overhead = prediction.o;
    // Leviathan et al.: E/(γc + 1) takes a verification call to cost one plain step and
    // everything else to be free.
    row.speedup_leviathan = row.emitted_formula / (gamma * row.c + 1.0);
    row.speedup_predicted = prediction.speedup;
    rows.push_back(row);
  }

  load.reset();
  const MachineIdentity& machine = machine_identity();
  if (o.json) {
    Json list = Json::array();
    for (const Row& r : rows) {
      list.push_back({{"gamma", r.gamma},
                      {"alpha", r.alpha},
                      {"alpha_sum_min", r.alpha_sum_min},
                      {"emitted_per_step", r.emitted_per_step},
                      {"emitted_formula", r.emitted_formula},
                      {"speedup", r.speedup},
                      {"speedup_predicted", r.speedup_predicted},
                      {"c", r.c},
                      {"tokens_per_s", r.tokens_per_s},
                      {"target_call_ratio", r.target_ratio},
                      {"overhead", r.overhead},
                      {"speedup_leviathan", r.speedup_leviathan},
                      {"generated", r.tokens},
                      {"stopped_at_eos", r.eos}});
    }
    Json json = machine_json(machine);
    json.update(Json{{"contending_processes", o.contend},
                     {"target", o.target},
                     {"draft", o.draft},
                     {"batch", o.batch},
                     {"tokens", o.tokens},
                     {"temperature", o.temperature},
                     {"prompts", made.source},
                     {"plain_tokens_per_s", plain_rate},
                     {"target_step_seconds", target_step},
                     {"plain_generated", plain.metrics.tokens},
                     {"plain_stopped_at_eos", plain_eos},
                     {"prompt_tokens_per_s", prompt_rate},
                     {"rows", list}});
    std::printf("%s\n", json_text(json).c_str());
    return;
  }
  std::printf("speclab bench decode: target %s, draft %s, B=%lld, %lld tokens per request, T=%g\n",
              o.target.c_str(), o.draft.c_str(), static_cast<long long>(o.batch),
              static_cast<long long>(o.tokens), o.temperature);
  std::printf("  machine: %s\n", machine_line(machine).c_str());
  if (o.contend > 0) {
    std::printf("  timed beside %d competing process%s spinning on a core each\n", o.contend,
                o.contend == 1 ? "" : "es");
  }
  std::printf("  prompts: %s\n", made.source.c_str());
  if (std::isfinite(prompt_rate)) {
    std::printf(
        "  prompt processing: %.1f tokens/s, each run's prompt pass, timed apart from its decode "
        "rate\n",
        prompt_rate);
  } else {
    std::printf("  prompt processing: none (the target keeps no per-sequence state)\n");
  }
  std::printf(
      "  plain decoding: %.1f tokens/s (target step %.3f ms), %lld tokens, %lld of %lld requests "
      "stopped at EOS\n\n",
      plain_rate, 1e3 * target_step, static_cast<long long>(plain.metrics.tokens),
      static_cast<long long>(plain_eos), static_cast<long long>(o.batch));
  std::printf(
      "  gamma  alpha  sum-min  emitted/step  formula  c      r      o      tok/s    speedup  "
      "predicted  Leviathan  tokens  EOS\n");
  for (const Row& r : rows) {
    std::printf(
        "  %5lld  %.3f  %.3f    %6.3f       %6.3f   %.3f  %5.2f  %5.3f  %7.1f  %5.2fx   %5.2fx     "
        "%5.2fx     %6lld  %lld\n",
        static_cast<long long>(r.gamma), r.alpha, r.alpha_sum_min, r.emitted_per_step,
        r.emitted_formula, r.c, r.target_ratio, r.overhead, r.tokens_per_s, r.speedup,
        r.speedup_predicted, r.speedup_leviathan, static_cast<long long>(r.tokens),
        static_cast<long long>(r.eos));
  }
  std::printf(
      "\n  alpha: accepted / tested draft positions; sum-min: mean Σ min(p, q) on the path;\n"
      "  formula: (1 − α^(γ+1))/(1 − α); c = a round's drafting ÷ γ, r = its verification\n"
      "  call, o = its time outside the model calls, each ÷ a plain step (the engine's sampling\n"
      "  included); predicted: the planner's finite run at α from these costs (the rounds of the\n"
      "  slowest request, formula / (γc + r + o) per round); Leviathan: formula / (γc + 1);\n"
      "  tokens: generated in all; EOS: requests that stopped at the end-of-sequence token.\n");
}

}  // namespace speclab::cli
