// `speclab plan --validate`: the planner's prediction of a run's speedup (core/plan/cost_model.hpp
// predict_run) against speculative decoding measured with the decode engine on this machine, by
// batch size and γ, for any target/draft pair of the model registry (lsm-target / lsm-draft by
// default).
//
// Rounds are the outer loop. Each round runs, for every batch size, first a calibration on other
// requests and another seed — a short plain run (its step), the target's verification pass
// timed as a call on that run's text, and short speculative runs (the draft's cost per call and
// the time outside the calls per round) — and then the timed runs: plain decoding, then speculative
// decoding at each γ. The prediction's costs are the calibration's medians over rounds at every
// batch size. Its acceptance comes from the plain runs alone (the target's own text, no
// speculative run): rounds of γ drafts verified on that text with the acceptance coins averaged
// out (add_verified_rounds) give E per round, and α is the geometric model's match to it. The
// plain run is the calibration a user makes on their own workload; the speculative runs are
// what is predicted. The rounds go on until every cell's interval is as narrow as --precision
// asks (or --max-rounds). A round's measured speedup is its plain time over its speculative
// time; the report gives the median over rounds, its order-statistic interval
// (plan_validate.hpp) and, for each prediction, the term (E, c, r, o) whose disagreement with
// the timed runs moves it most. Where the pair's passes can be priced from what its models are
// made of (LinearSoftmax; a GGUF target with a layer-skip or table draft) it also gives the
// roofline's prediction on this host's measured rates (pair_on_this_machine).
#include "bench/plan_validate.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <optional>
#include <string>
#include <vector>

#include "bench/benches.hpp"
#include "bench/prompts.hpp"
#include "core/base/error.hpp"
#include "core/base/philox.hpp"
#include "core/decode/decode.hpp"
#include "core/io/json.hpp"
#include "core/models/model_registry.hpp"
#include "core/models/synthetic_draft.hpp"
#include "core/plan/cost_model.hpp"
#include "core/probe/machine.hpp"
#include "core/probe/this_machine.hpp"
#include "core/sampling/sampling.hpp"
#include "experiments/run_costs.hpp"

namespace speclab::cli {

// ---- the arithmetic (plan_validate.hpp) ---------------------------------------------------------

double median_of(std::vector<double> values) {
  if (values.empty()) throw InvalidInput("the median of no values");
  std::sort(values.begin(), values.end());
  const size_t n = values.size();
  return n % 2 == 1 ? values[n / 2] : 0.5 * (values[n / 2 - 1] + values[n / 2]);
}

RoundsSpeedup speedup_over_rounds(std::span<const double> plain_seconds,
                                  std::span<const double> speculative_seconds, double level) {
  if (plain_seconds.size() != speculative_seconds.size() || plain_seconds.size() < 2) {
    throw InvalidInput(fmt::format(
        "a speedup over rounds needs the same number ≥ 2 of plain and speculative times (got {} "
        "and {})",
        plain_seconds.size(), speculative_seconds.size()));
  }
  std::vector<double> ratios;
  for (size_t k = 0; k < plain_seconds.size(); ++k) {
    if (!(plain_seconds[k] > 0.0 && speculative_seconds[k] > 0.0)) {
      throw InvalidInput(fmt::format("round {}: times must be positive (got {} s and {} s)", k,
                                     plain_seconds[k], speculative_seconds[k]));
    }
    ratios.push_back(plain_seconds[k] / speculative_seconds[k]);
  }
  std::sort(ratios.begin(), ratios.end());
  const int rounds = static_cast<int>(ratios.size());
  // below[j] = P[Binomial(R, ½) ≤ j], from the binomial coefficients C(R, i) in double (exact
  // for any R a run has).
  std::vector<double> below;
  double coefficient = 1.0, cumulative = 0.0;
  for (int i = 0; i <= rounds / 2; ++i) {
    cumulative += coefficient;
    below.push_back(std::ldexp(cumulative, -rounds));
    coefficient = coefficient * static_cast<double>(rounds - i) / static_cast<double>(i + 1);
  }
  int k = 1;
  while (k + 1 <= rounds / 2 && 1.0 - 2.0 * below[static_cast<size_t>(k)] >= level) ++k;
  return {.median = median_of(ratios),
          .low = ratios[static_cast<size_t>(k - 1)],
          .high = ratios[static_cast<size_t>(rounds - k)],
          .confidence = 1.0 - 2.0 * below[static_cast<size_t>(k - 1)],
          .rounds = rounds,
          .k = k};
}

Verdict judge(double predicted, const RoundsSpeedup& measured) {
  if (std::abs(predicted / measured.median - 1.0) <= kGoalRelativeError) {
    return Verdict::kWithinTenPercent;
  }
  if (predicted >= measured.low && predicted <= measured.high) return Verdict::kInsideInterval;
  return Verdict::kOutside;
}

std::string_view verdict_name(Verdict v) {
  switch (v) {
    case Verdict::kWithinTenPercent:
      return "within 10%";
    case Verdict::kInsideInterval:
      return "inside interval";
    case Verdict::kOutside:
      return "outside";
  }
  return "?";
}

double per_round_speedup(const RoundTerms& t, int64_t gamma) {
  return t.emitted / (static_cast<double>(gamma) * t.c + t.r + t.o);
}

double emitted_given_drafts(std::span<const double> accept) {
  double reach = 1.0, emitted = 1.0;
  for (const double a : accept) {
    reach *= a;
    emitted += reach;
  }
  return emitted;
}

double alpha_for_emitted(double emitted, int64_t gamma) {
  if (!(emitted >= 1.0 && emitted <= static_cast<double>(gamma + 1))) {
    throw InvalidInput(
        fmt::format("emitted per round {} is outside [1, gamma + 1 = {}]", emitted, gamma + 1));
  }
  double lo = 0.0, hi = 1.0;
  for (int i = 0; i < 100; ++i) {
    const double mid = 0.5 * (lo + hi);
    (expected_emitted(mid, gamma) < emitted ? lo : hi) = mid;
  }
  return 0.5 * (lo + hi);
}

std::vector<TermEffect> term_effects(const RoundTerms& predicted, const RoundTerms& measured,
                                     int64_t gamma) {
  const double base = per_round_speedup(predicted, gamma);
  std::vector<TermEffect> out;
  const auto add = [&](const char* name, double RoundTerms::*term) {
    RoundTerms swapped = predicted;
    swapped.*term = measured.*term;
    out.push_back({.term = name,
                   .predicted = predicted.*term,
                   .measured = measured.*term,
                   .effect = per_round_speedup(swapped, gamma) / base - 1.0});
  };
  add("emitted per round E", &RoundTerms::emitted);
  add("draft cost c", &RoundTerms::c);
  add("verification cost r", &RoundTerms::r);
  add("overhead o", &RoundTerms::o);
  return out;
}

TermEffect largest_effect(const std::vector<TermEffect>& effects) {
  if (effects.empty()) throw InvalidInput("no term effects");
  return *std::max_element(effects.begin(), effects.end(), [](const auto& a, const auto& b) {
    return std::abs(a.effect) < std::abs(b.effect);
  });
}

// ---- the timing loop ----------------------------------------------------------------------------

namespace {

const std::vector<int64_t> kDefaultBatches = {1, 2, 4, 8, 16};
// A target with a tokenizer is a real model (SmolLM2): ~10× slower per token on a CPU.
const std::vector<int64_t> kDefaultModelBatches = {1, 2, 4};
constexpr uint64_t kSeed = 11, kCalibrationSeed = 12;
constexpr uint64_t kPromptSeed = 7, kCalibrationPromptSeed = 8;
constexpr int kPassRepeats = 3;  // calls per timed pass (their median)

double seconds_now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

double acceptance_rate(int64_t accepted, int64_t tested) {
  return tested > 0 ? static_cast<double>(accepted) / static_cast<double>(tested) : 0.0;
}

// What R rounds measured for one (batch, γ).
struct CellRuns {
  std::vector<double> speculative_seconds;        // timed runs, per round
  std::vector<MeasuredRound> timed, calibration;  // per round
  int64_t accepted = 0, tested = 0;               // timed runs, pooled
  int64_t full_rounds = 0, full_emitted = 0;      // timed runs' rounds of the full γ, pooled
  double verified_sum = 0.0;                      // add_verified_rounds on the plain runs' text
  int64_t verified_rounds = 0;
};

struct BatchRuns {
  int64_t batch = 0;
  std::vector<double> plain_seconds, plain_step, calibration_plain_step;  // per round
  std::vector<CellRuns> cells;                                            // per γ
};

MeasuredRound median_round(const std::vector<MeasuredRound>& rounds, int64_t gamma) {
  std::vector<double> drafting, verify, overhead;
  for (const MeasuredRound& r : rounds) {
    drafting.push_back(r.drafting);
    verify.push_back(r.verify_pass);
    overhead.push_back(r.overhead);
  }
  return {.gamma = gamma,
          .drafting = median_of(drafting),
          .verify_pass = median_of(verify),
          .overhead = median_of(overhead)};
}

// The result for one (batch, γ).
struct Cell {
  int64_t gamma = 0;
  RunPrediction prediction;
  std::optional<double> roofline;  // the roofline's prediction (LinearSoftmax pairs)
  RoundsSpeedup measured;
  Verdict verdict = Verdict::kOutside;
  double alpha = 0.0, measured_alpha = 0.0;  // the prediction's α; the timed runs' accepted/tested
  RoundTerms predicted_terms, measured_terms;
  std::vector<TermEffect> effects;
};

struct Row {
  int64_t batch = 0;
  std::vector<Cell> cells;
  const Cell& predicted_best() const {
    return *std::max_element(cells.begin(), cells.end(), [](const Cell& a, const Cell& b) {
      return a.prediction.speedup < b.prediction.speedup;
    });
  }
  const Cell& measured_best() const {
    return *std::max_element(cells.begin(), cells.end(), [](const Cell& a, const Cell& b) {
      return a.measured.median < b.measured.median;
    });
  }
};

std::optional<int64_t> first_not_paying(const std::vector<Row>& rows, bool measured) {
  for (const Row& r : rows) {
    const double best =
        measured ? r.measured_best().measured.median : r.predicted_best().prediction.speedup;
    if (best <= 1.0) return r.batch;
  }
  return std::nullopt;
}

// Seconds of one call of `model` scoring the last m positions of every context (median of
// `repeats` calls), as a decoding round calls it: the state of each sequence (a KV cache) holds
// the tokens before those m, and is rolled back after each call so that every call does the
// same work.
double time_pass(LanguageModel& model, const std::vector<std::vector<int32_t>>& contexts, int64_t m,
                 const SamplingParams& sampling, int repeats) {
  std::vector<ScoreRequest> requests, prefixes;
  for (size_t b = 0; b < contexts.size(); ++b) {
    const std::span<const int32_t> all(contexts[b]);
    const auto kept = static_cast<int64_t>(all.size()) - m;  // the state before the m positions
    if (kept < 1) {
      throw InvalidInput(
          fmt::format("context {} has {} tokens; timing m = {} needs more", b, all.size(), m));
    }
    requests.push_back({all, m, static_cast<int64_t>(b)});
    prefixes.push_back({all.first(static_cast<size_t>(kept) + 1), 1, static_cast<int64_t>(b)});
  }
  model.prefill(prefixes);
  std::vector<float> probs(static_cast<size_t>(total_positions(requests) * model.vocab()));
  std::vector<double> seconds;
  for (int r = 0; r < repeats; ++r) {
    const double t0 = seconds_now();
    model.score(requests, sampling, probs);
    seconds.push_back(seconds_now() - t0);
    for (const ScoreRequest& q : requests) {
      model.truncate(q.sequence_id, static_cast<int64_t>(q.tokens.size()) - m);
    }
  }
  for (const ScoreRequest& q : requests) model.release(q.sequence_id);
  return median_of(seconds);
}

// Σ_x min(p, q) at every generated position of each request, from the target's and the draft's
// distributions along its prompt and generated tokens (teacher-forced, as the decode engine calls
// them: the prompt pass, then one call scoring every generated position): token-level
// verification's acceptance probability at each position of text with the target's law.
void add_teacher_forced(LanguageModel& target, LanguageModel& draft,
                        const std::vector<std::vector<int32_t>>& prompts,
                        const std::vector<std::vector<int32_t>>& generated,
                        const DecodeConfig& config, std::vector<std::vector<double>>& into) {
  const int64_t v = target.vocab();
  for (size_t b = 0; b < prompts.size(); ++b) {
    if (generated[b].empty()) continue;
    std::vector<int32_t> tokens = prompts[b];
    tokens.insert(tokens.end(), generated[b].begin(), generated[b].end() - 1);
    const auto n = static_cast<int64_t>(generated[b].size());
    const ScoreRequest prompt{prompts[b], 1, 0}, rows{tokens, n, 0};
    std::vector<float> p(static_cast<size_t>(n * v)), q(p.size());
    target.prefill(std::span(&prompt, 1));
    target.score(std::span(&rows, 1), config.sampling, p);
    target.release(0);
    draft.prefill(std::span(&prompt, 1));
    draft.score(std::span(&rows, 1), config.draft_sampling, q);
    draft.release(0);
    std::vector<double>& a = into.emplace_back(static_cast<size_t>(n), 0.0);
    for (int64_t t = 0; t < n; ++t) {
      double sum = 0.0;
      for (int64_t x = 0; x < v; ++x) {
        sum += std::min(p[static_cast<size_t>(t * v + x)], q[static_cast<size_t>(t * v + x)]);
      }
      a[static_cast<size_t>(t)] = sum;
    }
  }
}

// Rounds of token-level verification started from contexts of text with the target's law: at a
// position t of each request's generated tokens, the draft proposes γ tokens after prompt +
// generated[0, t) (each sampled from its row with the draft's Philox address), the target scores
// them in one call, and the round's expected emitted count given those drafts
// (emitted_given_drafts) is added to `sum` (and 1 to `rounds`). No acceptance coin is drawn: the
// expectation over them is exact. The next round of a request starts where this one would end
// on the text: for drafts its rows made certain (q(x) = 1: prompt lookup, n-gram tables),
// acceptance is exactly "the target's token equals the draft", so a round on the text emits the
// drafts that match it and then the text's next token, and its successor starts after that —
// the rounds start where a speculative decoding's do, right after a rejection. For sampled drafts
// no such coupling exists, and the next round starts γ + 1 positions on. Every request of the
// batch at once, as a decoding round calls the models; the models' state is rolled back to the
// context after each round.
void add_verified_rounds(LanguageModel& target, LanguageModel& draft,
                         const std::vector<std::vector<int32_t>>& prompts,
                         const std::vector<std::vector<int32_t>>& generated,
                         const DecodeConfig& config, int64_t gamma, double& sum, int64_t& rounds) {
  const int64_t v = target.vocab();
  std::vector<ScoreRequest> prefill;
  for (size_t b = 0; b < prompts.size(); ++b) {
    prefill.push_back({prompts[b], 1, static_cast<int64_t>(b)});
  }
  target.prefill(prefill);
  draft.prefill(prefill);
  std::vector<std::vector<int32_t>> sequences(prompts.size());
  std::vector<int64_t> start(prompts.size(), 0);  // each request's next round
  std::vector<size_t> active;
  std::vector<float> q, p;
  while (true) {
    active.clear();
    for (size_t b = 0; b < prompts.size(); ++b) {
      const int64_t t = start[b];
      if (t + gamma > static_cast<int64_t>(generated[b].size())) continue;
      active.push_back(b);
      sequences[b] = prompts[b];
      sequences[b].insert(sequences[b].end(), generated[b].begin(), generated[b].begin() + t);
    }
    if (active.empty()) break;
    std::vector<std::vector<double>> q_of_draft(active.size());
    for (int64_t i = 0; i < gamma; ++i) {
      std::vector<ScoreRequest> requests;
      for (const size_t b : active) {
        requests.push_back({sequences[b], 1, static_cast<int64_t>(b)});
      }
      q.resize(static_cast<size_t>(static_cast<int64_t>(requests.size()) * v));
      draft.score(requests, config.draft_sampling, q);
      for (size_t k = 0; k < active.size(); ++k) {
        const size_t b = active[k];
        const std::span<const float> row(q.data() + k * static_cast<size_t>(v),
                                         static_cast<size_t>(v));
        const RandomAddress address{config.seed,
                                    static_cast<uint32_t>(b),
                                    static_cast<uint32_t>(start[b]),
                                    static_cast<uint32_t>(i),
                                    Purpose::kDraftSample,
                                    0};
        const int32_t x = sample_categorical(row, philox_bits(address));
        q_of_draft[k].push_back(row[static_cast<size_t>(x)]);
        sequences[b].push_back(x);
      }
    }
    std::vector<ScoreRequest> requests;
    for (const size_t b : active) {
      requests.push_back({sequences[b], gamma + 1, static_cast<int64_t>(b)});
    }
    p.resize(static_cast<size_t>(static_cast<int64_t>(requests.size()) * (gamma + 1) * v));
    target.score(requests, config.sampling, p);
    for (size_t k = 0; k < active.size(); ++k) {
      const size_t b = active[k];
      const auto& seq = sequences[b];
      std::vector<double> accept;
      bool certain = true;
      int64_t matched = 0;  // leading drafts equal to the text
      for (int64_t i = 0; i < gamma; ++i) {
        const int32_t x = seq[seq.size() - static_cast<size_t>(gamma) + static_cast<size_t>(i)];
        const double px = p[(k * static_cast<size_t>(gamma + 1) + static_cast<size_t>(i)) *
                                static_cast<size_t>(v) +
                            static_cast<size_t>(x)];
        const double qx = q_of_draft[k][static_cast<size_t>(i)];
        accept.push_back(qx > 0.0 ? std::min(1.0, px / qx) : 0.0);
        certain = certain && qx == 1.0;
        if (matched == i && x == generated[b][static_cast<size_t>(start[b] + i)]) ++matched;
      }
      sum += emitted_given_drafts(accept);
      ++rounds;
      const auto committed = static_cast<int64_t>(seq.size()) - gamma;
      target.truncate(static_cast<int64_t>(b), committed);
      draft.truncate(static_cast<int64_t>(b), committed);
      start[b] += certain ? matched + 1 : gamma + 1;
    }
  }
  for (size_t b = 0; b < prompts.size(); ++b) {
    target.release(static_cast<int64_t>(b));
    draft.release(static_cast<int64_t>(b));
  }
}

double mean_acceptance(const std::vector<std::vector<double>>& acceptance) {
  double sum = 0.0;
  int64_t rows = 0;
  for (const auto& a : acceptance) {
    for (double x : a) sum += x;
    rows += static_cast<int64_t>(a.size());
  }
  return rows > 0 ? sum / static_cast<double>(rows) : 0.0;
}

int64_t total_rows(const std::vector<std::vector<double>>& acceptance) {
  int64_t rows = 0;
  for (const auto& a : acceptance) rows += static_cast<int64_t>(a.size());
  return rows;
}

// A round's drafting at the full γ: γ draft calls at the run's mean seconds per call. Timed
// inside a run, not as a call alone: a round's first draft call follows the target's pass and
// costs more than the ones after it (on the LinearSoftmax pair at batch 1, 0.69 ms per call at
// γ = 1 and 0.43 ms at γ = 6, where a call timed alone took 0.58 ms), so the mean per call
// depends on γ. Per call and not per round: a request's last rounds draft fewer than γ.
double full_round_drafting(const DecodeMetrics& m, int64_t gamma) {
  if (m.draft.calls < 1) throw InvalidInput("a speculative run without a draft call");
  return static_cast<double>(gamma) * m.draft.seconds / static_cast<double>(m.draft.calls);
}

// Tokens emitted per round over a run's rounds that drafted the full γ (the last rounds of a
// request draft fewer so as not to overshoot max_new_tokens).
void add_full_rounds(const DecodeMetrics& m, int64_t gamma, int64_t& rounds, int64_t& emitted) {
  for (size_t s = 0; s < m.step_drafted.size(); ++s) {
    if (m.step_drafted[s] != gamma) continue;
    ++rounds;
    emitted += m.step_emitted[s];
  }
}

// The widest interval over every (batch, γ) so far, as a fraction of its median.
double widest_interval(const std::vector<BatchRuns>& runs) {
  double widest = 0.0;
  for (const BatchRuns& br : runs) {
    for (const CellRuns& cell : br.cells) {
      widest = std::max(
          widest,
          speedup_over_rounds(br.plain_seconds, cell.speculative_seconds).relative_half_width());
    }
  }
  return widest;
}

void check_options(const PlanValidateOptions& o) {
  if (o.rounds < 2) {
    throw InvalidInput(fmt::format(
        "--rounds is {}; expected ≥ 2 (the interval is the spread over rounds)", o.rounds));
  }
  if (o.max_rounds < o.rounds) {
    throw InvalidInput(
        fmt::format("--max-rounds is {}; expected ≥ --rounds ({})", o.max_rounds, o.rounds));
  }
  if (!(o.precision > 0.0 && o.precision < 1.0)) {
    throw InvalidInput(fmt::format(
        "--precision is {}; expected a fraction of the median in (0, 1), e.g. 0.05", o.precision));
  }
  if (o.tokens < 2 || o.calibration_tokens < 2) {
    throw InvalidInput(fmt::format("--tokens and --calibration-tokens must be ≥ 2 (got {} and {})",
                                   o.tokens, o.calibration_tokens));
  }
  if (o.gammas.empty()) throw InvalidInput("--validate needs at least one --gamma");
  for (int64_t g : o.gammas) {
    if (g < 1) throw InvalidInput(fmt::format("--gamma value {} must be ≥ 1", g));
  }
  for (int64_t b : o.batches) {
    if (b < 1) throw InvalidInput(fmt::format("--batch value {} must be ≥ 1", b));
  }
}

Json terms_json(const RoundTerms& t) {
  return {{"emitted", t.emitted}, {"c", t.c}, {"r", t.r}, {"o", t.o}};
}

}  // namespace

void run_plan_validate(const PlanValidateOptions& o) {
  check_options(o);
  const double start = seconds_now();
  auto target = make_model(o.target);
  const bool chat = !tokenizer_file(o.target).empty();
  std::vector<int64_t> batches =
      o.batches.empty() ? (chat ? kDefaultModelBatches : kDefaultBatches) : o.batches;
  std::sort(batches.begin(), batches.end());
  batches.erase(std::unique(batches.begin(), batches.end()), batches.end());

  DecodeConfig config{.max_new_tokens = o.tokens,
                      .sampling = {.temperature = o.temperature},
                      .draft_sampling = {.temperature = o.temperature},
                      .seed = kSeed};
  // A synthetic draft at T = 0 would be one-hot; it drafts at T = 1 from its constructed rows.
  if (is_synthetic_draft(o.draft)) config.draft_sampling = {};
  auto draft = make_draft_model(o.draft, o.target, config.sampling, config.draft_sampling);
  if (target->vocab() != draft->vocab()) {
    throw InvalidInput(fmt::format("draft {} has vocabulary size {} but target {} has {}",
                                   draft->name(), draft->vocab(), target->name(), target->vocab()));
  }
  DecodeConfig calibration = config;
  calibration.max_new_tokens = o.calibration_tokens;
  calibration.seed = kCalibrationSeed;

  std::vector<BenchPrompts> prompts, calibration_prompts;
  for (int64_t b : batches) {
    prompts.push_back(bench_prompts({o.target, b, o.tokens, kPromptSeed, o.workload, ""}, *target));
    calibration_prompts.push_back(bench_prompts(
        {o.target, b, o.calibration_tokens, kCalibrationPromptSeed, o.workload, ""}, *target));
  }
  // Warm the lazily generated weights and the caches.
  {
    DecodeConfig warm = config;
    warm.max_new_tokens = 4;
    plain_decode(*target, prompts.front().tokens, warm);
    speculative_decode(*target, *draft, prompts.front().tokens, warm);
  }

  std::vector<BatchRuns> runs;
  for (int64_t b : batches) {
    runs.push_back({.batch = b, .cells = std::vector<CellRuns>(o.gammas.size())});
  }
  std::vector<std::vector<double>> acceptance;  // teacher-forced on the timed plain runs' text
  // Rounds are the outer loop: each round times every configuration once, plain beside
  // speculative, so that a slow spell of the machine falls on both sides of one round's ratio.
  // Each round decodes with its own seed, so the interval covers the samples' acceptance too.
  for (int k = 0; k < o.max_rounds; ++k) {
    if (k >= o.rounds && widest_interval(runs) <= o.precision) break;
    DecodeConfig timed = config, cal = calibration;
    timed.seed = kSeed + static_cast<uint64_t>(k);
    cal.seed = kCalibrationSeed + static_cast<uint64_t>(k);
    for (size_t i = 0; i < batches.size(); ++i) {
      BatchRuns& br = runs[i];
      // Calibration: a plain run's step; on its text each γ's verification pass timed as a call;
      // from a short speculative run the draft's cost per call and the round's outside time.
      const std::vector<std::vector<int32_t>>& cal_prompts = calibration_prompts[i].tokens;
      const DecodeResult cal_plain = plain_decode(*target, cal_prompts, cal);
      br.calibration_plain_step.push_back(experiments::measured_plain_step(cal_plain.metrics));
      std::vector<std::vector<int32_t>> contexts = cal_prompts;
      for (size_t b = 0; b < contexts.size(); ++b) {
        contexts[b].insert(contexts[b].end(), cal_plain.tokens[b].begin(),
                           cal_plain.tokens[b].end());
      }
      for (size_t j = 0; j < o.gammas.size(); ++j) {
        DecodeConfig c = cal;
        c.gamma = o.gammas[j];
        const DecodeResult r = speculative_decode(*target, *draft, cal_prompts, c);
        br.cells[j].calibration.push_back(
            {.gamma = c.gamma,
             .drafting = full_round_drafting(r.metrics, c.gamma),
             .verify_pass = time_pass(*target, contexts, c.gamma + 1, c.sampling, kPassRepeats),
             .overhead = experiments::measured_round(r.metrics, c.gamma).overhead});
      }
      const DecodeResult plain = plain_decode(*target, prompts[i].tokens, timed);
      br.plain_seconds.push_back(plain.metrics.decode_seconds);
      br.plain_step.push_back(experiments::measured_plain_step(plain.metrics));
      for (size_t j = 0; j < o.gammas.size(); ++j) {
        DecodeConfig c = timed;
        c.gamma = o.gammas[j];
        const DecodeResult r = speculative_decode(*target, *draft, prompts[i].tokens, c);
        CellRuns& cell = br.cells[j];
        cell.speculative_seconds.push_back(r.metrics.decode_seconds);
        MeasuredRound round = experiments::measured_round(r.metrics, c.gamma);
        round.drafting = full_round_drafting(r.metrics, c.gamma);
        cell.timed.push_back(round);
        cell.accepted += r.metrics.accepted_positions;
        cell.tested += r.metrics.tested_positions;
        add_full_rounds(r.metrics, c.gamma, cell.full_rounds, cell.full_emitted);
      }
      add_teacher_forced(*target, *draft, prompts[i].tokens, plain.tokens, timed, acceptance);
      for (size_t j = 0; j < o.gammas.size(); ++j) {
        add_verified_rounds(*target, *draft, prompts[i].tokens, plain.tokens, timed, o.gammas[j],
                            br.cells[j].verified_sum, br.cells[j].verified_rounds);
      }
    }
  }

  // The prediction's costs: the calibration's medians at every batch size.
  std::vector<MeasuredBatchCost> entries;
  for (const BatchRuns& br : runs) {
    MeasuredBatchCost e{.batch = br.batch, .plain_step = median_of(br.calibration_plain_step)};
    for (size_t j = 0; j < o.gammas.size(); ++j) {
      e.rounds.push_back(median_round(br.cells[j].calibration, o.gammas[j]));
    }
    entries.push_back(e);
  }
  const MeasuredRoundCosts costs(entries);

  std::vector<Row> rows;
  bool have_roofline = false;
  for (size_t i = 0; i < runs.size(); ++i) {
    const BatchRuns& br = runs[i];
    Row row{.batch = br.batch};
    // The roofline from what the models are made of, its KV cache at the run's mean length.
    int64_t prompt_tokens = 0;
    for (const auto& prompt : prompts[i].tokens) prompt_tokens += std::ssize(prompt);
    const int64_t context = prompt_tokens / std::ssize(prompts[i].tokens) + o.tokens / 2;
    std::optional<RooflineRoundCosts> roofline;
    if (const auto model = pair_on_this_machine(*target, *draft, context)) {
      roofline.emplace(*model);
      have_roofline = true;
    }
    const double plain_step = median_of(br.plain_step);
    for (size_t j = 0; j < o.gammas.size(); ++j) {
      const int64_t gamma = o.gammas[j];
      const CellRuns& cr = br.cells[j];
      // The planner's α at this γ: the one whose geometric round emits the windowed estimate.
      // The batch's own requests: a workload's requests take different conversations, so
      // another batch size decodes other prompts.
      const double verified_sum = cr.verified_sum;
      const int64_t verified_rounds = cr.verified_rounds;
      if (verified_rounds == 0) {
        throw InvalidInput(fmt::format(
            "no plain run generated gamma = {} tokens to verify against; raise --tokens", gamma));
      }
      const double emitted = verified_sum / static_cast<double>(verified_rounds);
      const double alpha = alpha_for_emitted(emitted, gamma);
      Cell cell{.gamma = gamma};
      cell.prediction = predict_run(costs, alpha, br.batch, gamma, o.tokens);
      if (roofline)
        cell.roofline = predict_run(*roofline, alpha, br.batch, gamma, o.tokens).speedup;
      cell.measured = speedup_over_rounds(br.plain_seconds, cr.speculative_seconds);
      cell.verdict = judge(cell.prediction.speedup, cell.measured);
      const RunPrediction& p = cell.prediction;
      cell.alpha = alpha;
      cell.predicted_terms = {.emitted = emitted, .c = p.c, .r = p.r, .o = p.o};
      const MeasuredRound timed = median_round(cr.timed, gamma);
      cell.measured_alpha = acceptance_rate(cr.accepted, cr.tested);
      cell.measured_terms = {.emitted = cr.full_rounds > 0 ? static_cast<double>(cr.full_emitted) /
                                                                 static_cast<double>(cr.full_rounds)
                                                           : std::nan(""),
                             .c = timed.drafting / static_cast<double>(gamma) / plain_step,
                             .r = timed.verify_pass / plain_step,
                             .o = timed.overhead / plain_step};
      cell.effects = term_effects(cell.predicted_terms, cell.measured_terms, gamma);
      row.cells.push_back(cell);
    }
    rows.push_back(row);
  }
  const auto predicted_even = first_not_paying(rows, false);
  const auto measured_even = first_not_paying(rows, true);
  int within = 0;
  for (const Row& r : rows) within += r.predicted_best().verdict != Verdict::kOutside;
  const double elapsed = seconds_now() - start;
  const double confidence = rows.front().cells.front().measured.confidence;
  const int rounds_run = rows.front().cells.front().measured.rounds;
  const double widest = widest_interval(runs);

  if (o.json) {
    Json machine = machine_json(machine_identity());
    Json list = Json::array();
    for (const Row& r : rows) {
      const Cell &p = r.predicted_best(), &m = r.measured_best();
      Json grid = Json::array();
      for (const Cell& c : r.cells) {
        Json effects = Json::array();
        for (const TermEffect& e : c.effects) {
          effects.push_back({{"term", e.term},
                             {"predicted", e.predicted},
                             {"measured", e.measured},
                             {"effect", e.effect}});
        }
        grid.push_back({{"gamma", c.gamma},
                        {"predicted", c.prediction.speedup},
                        {"predicted_per_round", c.prediction.per_round_speedup},
                        {"roofline", json_or_null(c.roofline)},
                        {"measured", c.measured.median},
                        {"measured_low", c.measured.low},
                        {"measured_high", c.measured.high},
                        {"verdict", verdict_name(c.verdict)},
                        {"alpha", c.measured_alpha},
                        {"alpha_predicted", c.alpha},
                        {"terms_predicted", terms_json(c.predicted_terms)},
                        {"terms_measured", terms_json(c.measured_terms)},
                        {"term_effects", effects}});
      }
      list.push_back({{"batch", r.batch},
                      {"gamma", p.gamma},
                      {"predicted", p.prediction.speedup},
                      {"measured", p.measured.median},
                      {"measured_low", p.measured.low},
                      {"measured_high", p.measured.high},
                      {"verdict", verdict_name(p.verdict)},
                      {"roofline", json_or_null(p.roofline)},
                      {"measured_best_gamma", m.gamma},
                      {"measured_best", m.measured.median},
                      {"by_gamma", grid}});
    }
    const Json out = {{"machine", machine},
                      {"target", o.target},
                      {"draft", o.draft},
                      {"tokens", o.tokens},
                      {"calibration_tokens", o.calibration_tokens},
                      {"alpha_teacher_forced", mean_acceptance(acceptance)},
                      {"alpha_rows", total_rows(acceptance)},
                      {"rounds", rounds_run},
                      {"min_rounds", o.rounds},
                      {"max_rounds", o.max_rounds},
                      {"precision_asked", o.precision},
                      {"widest_interval", widest},
                      {"interval_confidence", confidence},
                      {"temperature", o.temperature},
                      {"prompts", prompts.front().source},
                      {"rows", list},
                      {"batches_within_goal", within},
                      {"predicted_break_even_batch", json_or_null(predicted_even)},
                      {"measured_break_even_batch", json_or_null(measured_even)},
                      {"seconds", elapsed}};
    std::printf("%s\n", json_text(out).c_str());
    return;
  }
  std::printf(
      "speclab plan --validate: %s + %s on this machine, %lld tokens per request, T = %g, %d "
      "interleaved rounds\n",
      o.target.c_str(), o.draft.c_str(), static_cast<long long>(o.tokens), o.temperature,
      rounds_run);
  std::printf("  machine: %s\n", machine_line(machine_identity()).c_str());
  std::printf("  prompts: %s\n", prompts.front().source.c_str());
  std::printf(
      "  prediction: the planner's finite run (predict_run) on costs calibrated in the same "
      "rounds (per batch: plain step of a %lld-token run, verification pass timed as a call, "
      "draft cost per call and outside time per round from short speculative runs); E per round "
      "of each γ from rounds verified on the plain runs' text with the acceptance coins averaged "
      "out (add_verified_rounds), α the geometric model's match to E; Σ min(p, q) teacher-forced "
      "on that text: mean %.3f over %lld rows\n",
      static_cast<long long>(o.calibration_tokens), mean_acceptance(acceptance),
      static_cast<long long>(total_rows(acceptance)));
  std::printf(
      "\n  batch  γ*  predicted  measured [%2.0f%% interval]  error  verdict          | measured "
      "best γ  speedup%s\n",
      100.0 * confidence, have_roofline ? " | roofline" : "");
  for (const Row& r : rows) {
    const Cell &p = r.predicted_best(), &m = r.measured_best();
    std::printf(
        "  %5lld  %2lld  %8.2fx  %7.2fx [%.2f, %.2f]   %+5.0f%%  %-15s  |            %2lld  "
        "%6.2fx",
        static_cast<long long>(r.batch), static_cast<long long>(p.gamma), p.prediction.speedup,
        p.measured.median, p.measured.low, p.measured.high,
        100.0 * (p.prediction.speedup / p.measured.median - 1.0),
        std::string(verdict_name(p.verdict)).c_str(), static_cast<long long>(m.gamma),
        m.measured.median);
    if (p.roofline) std::printf(" | %6.2fx", *p.roofline);
    std::printf("\n");
  }
  std::printf(
      "\n  terms at γ* (predicted → measured in the timed runs; effect on the prediction):\n");
  for (const Row& r : rows) {
    const Cell& p = r.predicted_best();
    const TermEffect worst = largest_effect(p.effects);
    std::printf(
        "  %5lld  α %.3f→%.3f  E %.2f→%.2f  c %.3f→%.3f  r %.2f→%.2f  o %.3f→%.3f   largest: %s "
        "%+.0f%%%s\n",
        static_cast<long long>(r.batch), p.alpha, p.measured_alpha, p.predicted_terms.emitted,
        p.measured_terms.emitted, p.predicted_terms.c, p.measured_terms.c, p.predicted_terms.r,
        p.measured_terms.r, p.predicted_terms.o, p.measured_terms.o, worst.term.c_str(),
        100.0 * worst.effect, p.verdict == Verdict::kOutside ? "  ← why it is outside" : "");
  }
  auto show = [&](std::optional<int64_t> v) {
    return v ? fmt::format("{}", *v) : fmt::format("none up to {}", batches.back());
  };
  std::printf(
      "\n  break-even batch (smallest batch whose best speedup ≤ 1): predicted %s, measured %s\n",
      show(predicted_even).c_str(), show(measured_even).c_str());
  std::printf("  goal: %d of %zu batch sizes within 10%% of the median or inside its interval\n",
              within, rows.size());
  std::printf(
      "  precision: the widest interval is ±%.1f%% of its median (asked ±%.1f%%: %d rounds, at "
      "least %d and at most %d)%s\n",
      100.0 * widest, 100.0 * o.precision, rounds_run, o.rounds, o.max_rounds,
      widest <= o.precision ? "" : " — not reached; raise --max-rounds or --tokens");
  std::printf(
      "  γ*: the prediction's best γ of the grid; measured: median over rounds of plain ÷ "
      "speculative decode time, interval the k-th smallest and largest ratio of the rounds (it "
      "holds the median with probability %.1f%%); error = predicted ÷ measured − 1; E: tokens per "
      "round of the full γ; "
      "c, r, o in plain steps.%s\n",
      100.0 * confidence,
      have_roofline ? " roofline: the planner's roofline on this host's measured rates at the "
                      "prediction's α, from the models' weights (for a GGUF model the bytes of "
                      "its storage) and KV cache (speclab plan --gpu this-machine)."
                    : "");
  std::printf("  %.1f s\n", elapsed);
}

}  // namespace speclab::cli
