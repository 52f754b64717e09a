// The cost and memory planner (see cost_model.hpp; the closed forms are derived in
// proofs/expected_emitted.md).
#include "core/plan/cost_model.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <iterator>
#include <string_view>
#include <utility>
#include <vector>

#include "core/base/error.hpp"

namespace speclab {
namespace {

constexpr double kGB = 1e9;

void check_alpha(double alpha) {
  if (!(alpha >= 0.0 && alpha <= 1.0)) {
    throw InvalidInput(fmt::format("acceptance rate alpha is {}; expected 0 ≤ alpha ≤ 1", alpha));
  }
}

}  // namespace

// ---- Leviathan ----------------------------------------------------------------------------------

double expected_emitted(double alpha, int64_t gamma) {
  check_alpha(alpha);
  if (gamma < 0) throw InvalidInput(fmt::format("gamma is {}; expected gamma ≥ 0", gamma));
  if (alpha == 1.0) return static_cast<double>(gamma + 1);
  return (1.0 - std::pow(alpha, static_cast<double>(gamma + 1))) / (1.0 - alpha);
}

std::vector<double> expected_rounds_by_active(double alpha, int64_t gamma, int64_t tokens,
                                              int64_t batch) {
  check_alpha(alpha);
  if (gamma < 0 || tokens < 1 || batch < 1) {
    throw InvalidInput(fmt::format(
        "expected_rounds: gamma {}, tokens {}, batch {}; expected gamma ≥ 0, tokens ≥ 1, batch ≥ 1",
        gamma, tokens, batch));
  }
  // dist[n]: probability that a request has emitted n tokens after the rounds so far (n = tokens:
  // done). Every round emits ≥ 1 token, so after `tokens` rounds every request is done.
  std::vector<double> dist(static_cast<size_t>(tokens + 1), 0.0), next(dist.size());
  dist[0] = 1.0;
  std::vector<double> by_active(static_cast<size_t>(batch + 1), 0.0);
  const auto b = static_cast<double>(batch);
  for (int64_t s = 0; s < tokens; ++s) {
    // Round s runs with the requests not done after s rounds: Binomial(batch, 1 − done).
    const double done = dist[static_cast<size_t>(tokens)], active = 1.0 - done;
    if (done == 0.0) {
      by_active[static_cast<size_t>(batch)] += 1.0;
    } else if (active > 0.0) {
      for (int64_t a = 1; a <= batch; ++a) {
        const auto k = static_cast<double>(a);
        by_active[static_cast<size_t>(a)] +=
            std::exp(std::lgamma(b + 1.0) - std::lgamma(k + 1.0) - std::lgamma(b - k + 1.0) +
                     k * std::log(active) + (b - k) * std::log(done));
      }
    }
    std::fill(next.begin(), next.end(), 0.0);
    next[static_cast<size_t>(tokens)] = done;
    for (int64_t n = 0; n < tokens; ++n) {
      const double p = dist[static_cast<size_t>(n)];
      if (p == 0.0) continue;
      const int64_t drafts = std::min(gamma, tokens - n - 1);
      double reach = 1.0;  // α^(k−1): the first k − 1 drafts accepted
      for (int64_t k = 1; k <= drafts; ++k) {
        next[static_cast<size_t>(n + k)] += p * reach * (1.0 - alpha);
        reach *= alpha;
      }
      next[static_cast<size_t>(n + drafts + 1)] += p * reach;  // every draft accepted: the bonus
    }
    std::swap(dist, next);
  }
  return by_active;
}

double expected_rounds(double alpha, int64_t gamma, int64_t tokens, int64_t batch) {
  const std::vector<double> by_active = expected_rounds_by_active(alpha, gamma, tokens, batch);
  double rounds = 0.0;
  for (const double r : by_active) rounds += r;
  return rounds;
}

double walltime_gain(double alpha, int64_t gamma, double c) {
  if (!(c >= 0.0 && std::isfinite(c))) {
    throw InvalidInput(fmt::format("cost ratio c is {}; expected a finite c ≥ 0", c));
  }
  return expected_emitted(alpha, gamma) / (static_cast<double>(gamma) * c + 1.0);
}

GammaChoice optimal_gamma(double alpha, double c, int64_t max_gamma) {
  if (max_gamma < 1) {
    throw InvalidInput(fmt::format("max_gamma is {}; expected ≥ 1", max_gamma));
  }
  GammaChoice best{1, walltime_gain(alpha, 1, c)};
  for (int64_t g = 2; g <= max_gamma; ++g) {
    const double gain = walltime_gain(alpha, g, c);
    if (gain > best.gain) best = {g, gain};
  }
  return best;
}

// ---- roofline -----------------------------------------------------------------------------------

void check_tensor_parallel(const ModelSpec& model, int64_t n) {
  if (n < 1) {
    throw InvalidInput(fmt::format("--tensor-parallel-size {}: expected at least 1", n));
  }
  if (model.heads % n != 0 || (model.kv_heads % n != 0 && n % model.kv_heads != 0)) {
    throw InvalidInput(fmt::format(
        "--tensor-parallel-size {}: {} cannot be split over {} GPUs: it has {} attention heads and "
        "{} KV heads; expected a size that divides the attention heads and divides, or is a "
        "multiple of, the KV heads",
        n, model.name, n, model.heads, model.kv_heads));
  }
}

int64_t kv_bytes_per_token_per_gpu(const ModelSpec& model, int64_t n) {
  check_tensor_parallel(model, n);
  const int64_t heads_per_gpu = std::max<int64_t>(1, model.kv_heads / n);
  return model.kv_bytes_per_token() / model.kv_heads * heads_per_gpu;
}

PassProfile pass_profile(const ModelSpec& model, int64_t tensor_parallel) {
  check_tensor_parallel(model, tensor_parallel);
  const auto n = static_cast<double>(tensor_parallel);
  const double activation_bytes = model.dtype == WeightDtype::kFp32 ? 4.0 : 2.0;
  return {
      .name = model.name,
      .weight_bytes_read = model.weight_bytes_read() / n,
      .flops_per_token = model.flops_per_token() / n,
      .kv_bytes_per_token = static_cast<double>(kv_bytes_per_token_per_gpu(model, tensor_parallel)),
      .attention_flops_per_context_token = model.attention_flops_per_context_token() / n,
      .weight_bytes_stored = model.weight_bytes() / n,
      .vocab = model.vocab,
      .compute_dtype = model.dtype,
      .tensor_parallel = tensor_parallel,
      .allreduce_bytes_per_token = 2.0 * static_cast<double>(model.layers) * 2.0 * (n - 1.0) / n *
                                   static_cast<double>(model.hidden) * activation_bytes};
}

RooflineRates roofline_rates(const HardwareSpec& hardware, WeightDtype dtype) {
  return {.bytes_per_second = hardware.bandwidth_bytes_per_second(),
          .flops_per_second = hardware.flops_per_second(dtype),
          .seconds_per_logit = hardware.seconds_per_logit,
          .launch_overhead_seconds = hardware.launch_overhead_seconds,
          .overlapped = hardware.overlapped,
          .interconnect_bytes_per_second = hardware.interconnect_gbps * 1e9};
}

PassTime forward_time(const PassProfile& model, const RooflineRates& rates, int64_t batch,
                      int64_t tokens, int64_t context) {
  if (batch < 1 || tokens < 1 || context < 0) {
    throw InvalidInput(
        fmt::format("forward pass of {} needs batch ≥ 1, tokens ≥ 1, context ≥ 0 (got {}, {}, {})",
                    model.name, batch, tokens, context));
  }
  if (!(rates.bytes_per_second > 0.0 && rates.flops_per_second > 0.0)) {
    throw InvalidInput(fmt::format("roofline rates must be positive (got {} B/s, {} FLOP/s)",
                                   rates.bytes_per_second, rates.flops_per_second));
  }
  const double b = static_cast<double>(batch), rows = b * static_cast<double>(tokens);
  const double logits = rows * static_cast<double>(model.vocab);
  PassTime t;
  t.bytes = model.weight_bytes_read + b * static_cast<double>(context) * model.kv_bytes_per_token;
  if (rates.seconds_per_logit == 0.0) t.bytes += 8.0 * logits;  // fp32 logits in, probs out
  t.flops = rows * (model.flops_per_token +
                    static_cast<double>(context) * model.attention_flops_per_context_token);
  t.memory_seconds = t.bytes / rates.bytes_per_second;
  t.compute_seconds = t.flops / rates.flops_per_second;
  t.sampling_seconds = logits * rates.seconds_per_logit;
  t.compute_bound = t.compute_seconds > t.memory_seconds;
  const double roofline = rates.overlapped ? std::max(t.memory_seconds, t.compute_seconds)
                                           : t.memory_seconds + t.compute_seconds;
  if (model.allreduce_bytes_per_token > 0.0) {
    if (!(rates.interconnect_bytes_per_second > 0.0)) {
      throw InvalidInput(fmt::format(
          "{} split over {} GPUs needs a GPU interconnect, and this hardware has none; use "
          "--tensor-parallel-size 1",
          model.name, model.tensor_parallel));
    }
    t.allreduce_seconds =
        rows * model.allreduce_bytes_per_token / rates.interconnect_bytes_per_second;
  }
  t.seconds = roofline + t.sampling_seconds + rates.launch_overhead_seconds + t.allreduce_seconds;
  return t;
}

// ---- the speculative step -----------------------------------------------------------------------

double verify_time(const RooflineRates& rates, int64_t vocab, int64_t batch, int64_t gamma) {
  const double elements =
      static_cast<double>(batch) * static_cast<double>(2 * gamma + 1) * static_cast<double>(vocab);
  if (rates.seconds_per_logit > 0.0) return elements * rates.seconds_per_logit;
  return 4.0 * elements / rates.bytes_per_second + rates.launch_overhead_seconds;
}

StepCost step_cost(const PairCostModel& model, double alpha, int64_t batch, int64_t gamma) {
  if (gamma < 1) throw InvalidInput(fmt::format("gamma is {}; expected gamma ≥ 1", gamma));
  check_alpha(alpha);
  StepCost s;
  s.batch = batch;
  s.gamma = gamma;
  s.alpha = alpha;
  s.expected_emitted = expected_emitted(alpha, gamma);
  s.plain_seconds = forward_time(model.target, model.target_rates, batch, 1, model.context).seconds;
  const double draft_step =
      forward_time(model.draft, model.draft_rates, batch, 1, model.context).seconds;
  s.draft_seconds = static_cast<double>(gamma) * draft_step;
  const PassTime verify_pass =
      forward_time(model.target, model.target_rates, batch, gamma + 1, model.context);
  s.target_seconds = verify_pass.seconds;
  s.target_compute_bound = verify_pass.compute_bound;
  s.verify_seconds = verify_time(model.target_rates, model.target.vocab, batch, gamma);
  s.step_seconds = s.draft_seconds + s.target_seconds + s.verify_seconds;
  s.speedup = s.expected_emitted * s.plain_seconds / s.step_seconds;
  s.c = draft_step / s.plain_seconds;
  return s;
}

// ---- a run priced round by round ---------------------------------------------------------------

double RooflineRoundCosts::plain_step(int64_t active) const {
  return forward_time(model_.target, model_.target_rates, active, 1, model_.context).seconds;
}

double RooflineRoundCosts::drafting(int64_t active, int64_t gamma) const {
  return static_cast<double>(gamma) *
         forward_time(model_.draft, model_.draft_rates, active, 1, model_.context).seconds;
}

double RooflineRoundCosts::verify_pass(int64_t active, int64_t gamma) const {
  return forward_time(model_.target, model_.target_rates, active, gamma + 1, model_.context)
      .seconds;
}

double RooflineRoundCosts::round_overhead(int64_t active, int64_t gamma) const {
  return verify_time(model_.target_rates, model_.target.vocab, active, gamma);
}

namespace {

const MeasuredRound& round_at(const MeasuredBatchCost& e, int64_t gamma) {
  for (const MeasuredRound& r : e.rounds) {
    if (r.gamma == gamma) return r;
  }
  throw InvalidInput(
      fmt::format("measured costs at batch {} have no round at gamma {}", e.batch, gamma));
}

void check_seconds(double seconds, int64_t batch, std::string_view what) {
  if (!(std::isfinite(seconds) && seconds >= 0.0)) {
    throw InvalidInput(fmt::format("measured {} at batch {} is {} s; expected a finite time ≥ 0",
                                   what, batch, seconds));
  }
}

}  // namespace

MeasuredRoundCosts::MeasuredRoundCosts(std::vector<MeasuredBatchCost> entries)
    : entries_(std::move(entries)) {
  if (entries_.empty()) throw InvalidInput("measured costs need at least one batch size");
  std::sort(entries_.begin(), entries_.end(),
            [](const auto& a, const auto& b) { return a.batch < b.batch; });
  for (size_t i = 0; i < entries_.size(); ++i) {
    const MeasuredBatchCost& e = entries_[i];
    if (e.batch < 1) {
      throw InvalidInput(fmt::format("measured costs at batch {}; expected batch ≥ 1", e.batch));
    }
    if (i > 0 && entries_[i - 1].batch == e.batch) {
      throw InvalidInput(fmt::format("measured costs name batch {} twice", e.batch));
    }
    check_seconds(e.plain_step, e.batch, "plain step");
    for (const MeasuredRound& r : e.rounds) {
      check_seconds(r.drafting, e.batch, "drafting");
      check_seconds(r.verify_pass, e.batch, "verify pass");
      check_seconds(r.overhead, e.batch, "round overhead");
    }
  }
}

template <typename Term>
double MeasuredRoundCosts::interpolate(int64_t active, Term term) const {
  if (active <= entries_.front().batch) return term(entries_.front());
  if (active >= entries_.back().batch) return term(entries_.back());
  const auto hi = std::find_if(entries_.begin(), entries_.end(),
                               [&](const MeasuredBatchCost& e) { return e.batch >= active; });
  const auto lo = std::prev(hi);
  const double t =
      static_cast<double>(active - lo->batch) / static_cast<double>(hi->batch - lo->batch);
  return (1.0 - t) * term(*lo) + t * term(*hi);
}

double MeasuredRoundCosts::plain_step(int64_t active) const {
  return interpolate(active, [](const MeasuredBatchCost& e) { return e.plain_step; });
}

double MeasuredRoundCosts::drafting(int64_t active, int64_t gamma) const {
  return interpolate(active,
                     [&](const MeasuredBatchCost& e) { return round_at(e, gamma).drafting; });
}

double MeasuredRoundCosts::verify_pass(int64_t active, int64_t gamma) const {
  return interpolate(active,
                     [&](const MeasuredBatchCost& e) { return round_at(e, gamma).verify_pass; });
}

double MeasuredRoundCosts::round_overhead(int64_t active, int64_t gamma) const {
  return interpolate(active,
                     [&](const MeasuredBatchCost& e) { return round_at(e, gamma).overhead; });
}

RunPrediction predict_run(const RoundCosts& costs, double alpha, int64_t batch, int64_t gamma,
                          int64_t tokens) {
  if (gamma < 1) throw InvalidInput(fmt::format("gamma is {}; expected gamma ≥ 1", gamma));
  const std::vector<double> rounds = expected_rounds_by_active(alpha, gamma, tokens, batch);
  RunPrediction p;
  for (int64_t a = 1; a <= batch; ++a) {
    const double n = rounds[static_cast<size_t>(a)];
    p.rounds += n;
    if (n > 0.0) p.speculative_seconds += n * costs.round(a, gamma);
  }
  const double plain = costs.plain_step(batch);
  p.plain_seconds = static_cast<double>(tokens) * plain;
  p.speedup = p.plain_seconds / p.speculative_seconds;
  p.expected_emitted = expected_emitted(alpha, gamma);
  p.per_round_speedup = p.expected_emitted * plain / costs.round(batch, gamma);
  p.c = costs.drafting(batch, gamma) / static_cast<double>(gamma) / plain;
  p.r = costs.verify_pass(batch, gamma) / plain;
  p.o = costs.round_overhead(batch, gamma) / plain;
  return p;
}

double finite_run_speedup(const PairCostModel& model, double alpha, int64_t batch, int64_t gamma,
                          int64_t tokens) {
  return predict_run(RooflineRoundCosts(model), alpha, batch, gamma, tokens).speedup;
}

StepCost best_step(const PairCostModel& model, double alpha, int64_t batch,
                   const std::vector<int64_t>& gammas, int64_t max_gamma) {
  std::vector<int64_t> candidates = gammas;
  if (candidates.empty()) {
    for (int64_t g = 1; g <= max_gamma; ++g) candidates.push_back(g);
  }
  StepCost best;
  bool first = true;
  for (int64_t g : candidates) {
    const StepCost s = step_cost(model, alpha, batch, g);
    if (first || s.speedup > best.speedup) best = s;
    first = false;
  }
  return best;
}

std::optional<int64_t> break_even_batch(const PairCostModel& model, double alpha,
                                        const std::vector<int64_t>& gammas, int64_t max_batch) {
  for (int64_t b = 1; b <= max_batch; ++b) {
    if (best_step(model, alpha, b, gammas).speedup <= 1.0) return b;
  }
  return std::nullopt;
}

// ---- VRAM ---------------------------------------------------------------------------------------

MemoryPlan plan_memory(const ModelSpec& target, const ModelSpec& draft, const HardwareSpec& gpu,
                       int64_t context, double utilization, int64_t tensor_parallel) {
  if (!(utilization > 0.0 && utilization <= 1.0)) {
    throw InvalidInput(fmt::format(
        "--memory-utilization is {}; expected a fraction in (0, 1], e.g. 0.9", utilization));
  }
  if (context < 1) throw InvalidInput(fmt::format("--context is {}; expected ≥ 1", context));
  check_tensor_parallel(target, tensor_parallel);
  check_tensor_parallel(draft, tensor_parallel);
  const auto n = static_cast<double>(tensor_parallel);
  MemoryPlan m;
  m.tensor_parallel = tensor_parallel;
  m.capacity_bytes = gpu.memory_bytes();
  m.utilization = utilization;
  m.budget_bytes = m.capacity_bytes * utilization;
  m.context = context;
  m.target_weight_bytes = target.weight_bytes() / n;
  m.draft_weight_bytes = draft.weight_bytes() / n;
  m.target_workspace_bytes = target.workspace_bytes(kWorkspaceTokens, kWorkspaceLogitRows);
  m.draft_workspace_bytes = draft.workspace_bytes(kWorkspaceTokens, kWorkspaceLogitRows);
  m.target_kv_bytes_per_token = kv_bytes_per_token_per_gpu(target, tensor_parallel);
  m.draft_kv_bytes_per_token = kv_bytes_per_token_per_gpu(draft, tensor_parallel);
  m.kv_budget_without_draft = m.budget_bytes - m.target_weight_bytes - m.target_workspace_bytes;
  m.kv_budget_with_draft =
      m.kv_budget_without_draft - m.draft_weight_bytes - m.draft_workspace_bytes;

  const std::string where =
      tensor_parallel == 1
          ? fmt::format("{} ({:.1f} GiB × {} utilisation = {:.2f} GB usable)", gpu.name,
                        gpu.memory_gib, utilization, m.budget_bytes / kGB)
          : fmt::format(
                "{} GPUs {} ({:.1f} GiB × {} utilisation = {:.2f} GB usable each; weights "
                "per GPU)",
                tensor_parallel, gpu.name, gpu.memory_gib, utilization, m.budget_bytes / kGB);
  if (m.kv_budget_without_draft <= 0.0) {
    throw InvalidInput(fmt::format(
        "target {} does not fit in {}: {:.2f} GB of {} weights + {:.2f} GB workspace; short by "
        "{:.2f} GB (pick a larger GPU, a quantised model or a higher --memory-utilization)",
        target.name, where, m.target_weight_bytes / kGB, weight_dtype_name(target.dtype),
        m.target_workspace_bytes / kGB, -m.kv_budget_without_draft / kGB));
  }
  if (m.kv_budget_with_draft <= 0.0) {
    throw InvalidInput(fmt::format(
        "target {} and draft {} do not fit together in {}: {:.2f} + {:.2f} GB of weights + "
        "{:.2f} GB workspace; short by {:.2f} GB",
        target.name, draft.name, where, m.target_weight_bytes / kGB, m.draft_weight_bytes / kGB,
        (m.target_workspace_bytes + m.draft_workspace_bytes) / kGB, -m.kv_budget_with_draft / kGB));
  }
  const double per_sequence_target = static_cast<double>(context * m.target_kv_bytes_per_token);
  const double per_sequence_both =
      static_cast<double>(context * (m.target_kv_bytes_per_token + m.draft_kv_bytes_per_token));
  m.max_sequences_without_draft =
      static_cast<int64_t>(std::floor(m.kv_budget_without_draft / per_sequence_target));
  m.max_sequences_with_draft =
      static_cast<int64_t>(std::floor(m.kv_budget_with_draft / per_sequence_both));
  if (m.max_sequences_with_draft < 1) {
    throw InvalidInput(fmt::format(
        "no room for one sequence of {} tokens with target {} and draft {} in {}: its KV cache "
        "needs {:.2f} GB, {:.2f} GB is left after the weights; short by {:.2f} GB (lower "
        "--context)",
        context, target.name, draft.name, where, per_sequence_both / kGB,
        m.kv_budget_with_draft / kGB, (per_sequence_both - m.kv_budget_with_draft) / kGB));
  }
  m.headroom_with_draft =
      m.kv_budget_with_draft - static_cast<double>(m.max_sequences_with_draft) * per_sequence_both;
  return m;
}

std::optional<int64_t> smallest_fitting_tensor_parallel(const ModelSpec& target,
                                                        const ModelSpec& draft,
                                                        const HardwareSpec& gpu, int64_t context,
                                                        double utilization, int64_t from) {
  constexpr int64_t kMaxTensorParallel = 64;
  for (int64_t n = std::max<int64_t>(from, 1); n <= kMaxTensorParallel; ++n) {
    try {
      check_tensor_parallel(target, n);
      check_tensor_parallel(draft, n);
      plan_memory(target, draft, gpu, context, utilization, n);
      return n;
    } catch (const InvalidInput&) {
      continue;
    }
  }
  return std::nullopt;
}

}  // namespace speclab
