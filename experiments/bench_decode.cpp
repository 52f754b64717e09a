// `speclab bench decode`: measured speculative-decoding speedup for a model pair, beside the
// closed forms of SPEC.md V1 (E = (1 − α^{γ+1})/(1 − α), predicted gain E/(γc + 1)).
#include <fmt/format.h>

#include <cmath>
#include <cstdio>
#include <string>

#include "core/decode.hpp"
#include "core/error.hpp"
#include "core/model_registry.hpp"
#include "core/models/ngram.hpp"
#include "core/philox.hpp"
#include "experiments/benches.hpp"

namespace speclab::cli {
namespace {

struct Row {
  int64_t gamma = 0;
  double alpha = 0, alpha_sum_min = 0, emitted_per_step = 0, emitted_formula = 0;
  double speedup = 0, speedup_predicted = 0, speedup_leviathan = 0, c = 0, tokens_per_s = 0;
  double target_ratio = 0, overhead = 0;
};

double per_call(const ModelStats& s) { return s.calls ? s.seconds / s.calls : 0.0; }

std::vector<std::vector<int32_t>> make_prompts(const LanguageModel& target, int64_t batch,
                                               uint64_t seed) {
  std::vector<std::vector<int32_t>> prompts;
  const bool text = target.vocab() == kByteVocab;
  for (int64_t b = 0; b < batch; ++b) {
    if (text) {
      prompts.push_back(corpus_prompt(4096 * b, 64));
    } else {
      std::vector<int32_t> p(16);
      for (size_t i = 0; i < p.size(); ++i) {
        const RandomAddress a{
            seed, static_cast<uint32_t>(b), 0, static_cast<uint32_t>(i), Purpose::kPlainSample, 1};
        p[i] = static_cast<int32_t>(philox_bits(a) % static_cast<uint32_t>(target.vocab()));
      }
      prompts.push_back(p);
    }
  }
  return prompts;
}

}  // namespace

void run_bench_decode(const BenchDecodeOptions& o) {
  if (o.tokens < 2 || o.batch < 1 || o.gamma.empty()) {
    throw InvalidInput(fmt::format(
        "bench decode needs --tokens ≥ 2, --batch ≥ 1 and at least one --gamma (got {}, {}, {})",
        o.tokens, o.batch, o.gamma.size()));
  }
  for (int64_t g : o.gamma) {
    if (g < 1) throw InvalidInput(fmt::format("--gamma value {} must be ≥ 1", g));
  }
  auto target = make_model(o.target);
  auto draft = make_model(o.draft);
  if (target->vocab() != draft->vocab()) {
    throw InvalidInput(fmt::format("draft {} has vocabulary size {} but target {} has {}",
                                   draft->name(), draft->vocab(), target->name(), target->vocab()));
  }
  const auto prompts = make_prompts(*target, o.batch, o.seed);
  DecodeConfig config{.max_new_tokens = o.tokens,
                      .sampling = {.temperature = o.temperature},
                      .draft_sampling = {.temperature = o.temperature},
                      .seed = o.seed};
  // Warm caches and lazily built weights before timing.
  DecodeConfig warm = config;
  warm.max_new_tokens = 4;
  plain_decode(*target, prompts, warm);
  speculative_decode(*target, *draft, prompts, warm);

  const DecodeResult plain = plain_decode(*target, prompts, config);
  const double plain_seconds = plain.metrics.seconds;
  const double plain_rate = plain.metrics.tokens / plain_seconds;
  const double target_step = per_call(plain.metrics.target);

  std::vector<Row> rows;
  for (int64_t gamma : o.gamma) {
    config.gamma = gamma;
    const DecodeResult spec = speculative_decode(*target, *draft, prompts, config);
    const DecodeMetrics& m = spec.metrics;
    Row row;
    row.gamma = gamma;
    row.alpha = m.acceptance_rate();
    row.alpha_sum_min = m.alpha_estimate();
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
    row.tokens_per_s = m.tokens / m.seconds;
    row.speedup = row.tokens_per_s / plain_rate;
    row.c = per_call(m.draft) / target_step;
    row.target_ratio = per_call(m.target) / target_step;
    // Per verification round, the time outside the models' calls (sampling the drafts,
    // verifying, bookkeeping), in target steps.
    const double outside = m.seconds - m.target.seconds - m.draft.seconds;
    row.overhead = m.target.calls ? outside / m.target.calls / target_step : 0.0;
    // Leviathan et al.: E/(γc + 1) takes a verification call to cost one target step and
    // everything else to be free. The prediction uses the measured costs of a round instead:
    // E/(γc + r + o), r = T(γ+1)/T(1).
    row.speedup_leviathan = row.emitted_formula / (gamma * row.c + 1.0);
    row.speedup_predicted = row.emitted_formula / (gamma * row.c + row.target_ratio + row.overhead);
    rows.push_back(row);
  }

  if (o.json) {
    std::string out = fmt::format(
        "{{\"target\": \"{}\", \"draft\": \"{}\", \"batch\": {}, \"tokens\": {}, "
        "\"temperature\": {}, \"plain_tokens_per_s\": {:.6g}, \"target_step_seconds\": {:.6g}, "
        "\"rows\": [",
        target->name(), draft->name(), o.batch, o.tokens, o.temperature, plain_rate, target_step);
    for (size_t i = 0; i < rows.size(); ++i) {
      const Row& r = rows[i];
      out += fmt::format(
          "{}{{\"gamma\": {}, \"alpha\": {:.6g}, \"alpha_sum_min\": {:.6g}, "
          "\"emitted_per_step\": {:.6g}, \"emitted_formula\": {:.6g}, \"speedup\": {:.6g}, "
          "\"speedup_predicted\": {:.6g}, \"c\": {:.6g}, \"tokens_per_s\": {:.6g}, "
          "\"target_call_ratio\": {:.6g}, \"overhead\": {:.6g}, \"speedup_leviathan\": {:.6g}}}",
          i ? ", " : "", r.gamma, r.alpha, r.alpha_sum_min, r.emitted_per_step, r.emitted_formula,
          r.speedup, r.speedup_predicted, r.c, r.tokens_per_s, r.target_ratio, r.overhead,
          r.speedup_leviathan);
    }
    std::printf("%s]}\n", out.c_str());
    return;
  }
  std::printf("speclab bench decode: target %s, draft %s, B=%lld, %lld tokens per request, T=%g\n",
              target->name().c_str(), draft->name().c_str(), static_cast<long long>(o.batch),
              static_cast<long long>(o.tokens), o.temperature);
  std::printf("  plain decoding: %.1f tokens/s (target step %.3f ms)\n\n", plain_rate,
              1e3 * target_step);
  std::printf(
      "  gamma  alpha  sum-min  emitted/step  formula  c      r      o      speedup  predicted  "
      "Leviathan\n");
  for (const Row& r : rows) {
    std::printf(
        "  %5lld  %.3f  %.3f    %6.3f       %6.3f   %.3f  %5.2f  %5.3f  %5.2fx   %5.2fx     "
        "%5.2fx\n",
        static_cast<long long>(r.gamma), r.alpha, r.alpha_sum_min, r.emitted_per_step,
        r.emitted_formula, r.c, r.target_ratio, r.overhead, r.speedup, r.speedup_predicted,
        r.speedup_leviathan);
  }
  std::printf(
      "\n  alpha: accepted / tested draft positions; sum-min: mean Σ min(p, q) on the path;\n"
      "  formula: (1 − α^(γ+1))/(1 − α); c = draft step ÷ target step; r = verification call ÷\n"
      "  target step; o = time outside the model calls per round ÷ target step;\n"
      "  predicted: formula / (γc + r + o); Leviathan: formula / (γc + 1).\n");
}

}  // namespace speclab::cli
