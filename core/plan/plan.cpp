// A whole plan for one target/draft pair on one GPU (see plan.hpp).
#include "core/plan/plan.hpp"

#include <fmt/format.h>

#include "core/base/error.hpp"

namespace speclab {
namespace {

void check_same_vocabulary(const ModelSpec& target, const ModelSpec& draft) {
  if (target.vocab != draft.vocab) {
    throw InvalidInput(fmt::format(
        "draft {} has vocabulary size {} but target {} has {}; speculative decoding needs the "
        "same vocabulary",
        draft.name, draft.vocab, target.name, target.vocab));
  }
}

// The best step and the grid row of every batch.
void fill_speedups(const PlanRequest& request, PlanResult& plan) {
  for (int64_t b : request.batches) {
    plan.best.push_back(best_step(plan.model, plan.alpha, b, request.gammas, kPlanMaxGamma));
    std::vector<double> row;
    for (int64_t g : plan.columns) row.push_back(step_cost(plan.model, plan.alpha, b, g).speedup);
    plan.speedups.push_back(row);
  }
}

}  // namespace

std::string_view break_even_limit_name(PlanResult::BreakEvenLimit limit) {
  switch (limit) {
    case PlanResult::BreakEvenLimit::kSpeedup:
      return "speedup";
    case PlanResult::BreakEvenLimit::kMemory:
      return "memory";
    case PlanResult::BreakEvenLimit::kSearch:
      break;
  }
  return "search";
}

PlanResult compute_plan(const PlanRequest& request) {
  PlanResult plan;
  plan.gpu = request.gpu;
  if (request.launch_overhead_seconds) {
    plan.gpu.launch_overhead_seconds = *request.launch_overhead_seconds;
  }
  plan.target = request.target_model ? *request.target_model : find_llm(request.target);
  plan.draft = request.draft_model ? *request.draft_model : find_llm(request.draft);
  check_same_vocabulary(plan.target, plan.draft);
  const int64_t n = request.tensor_parallel;
  check_tensor_parallel(plan.target, n);
  check_tensor_parallel(plan.draft, n);
  if (n > 1 && !(plan.gpu.interconnect_gbps > 0.0)) {
    throw InvalidInput(fmt::format(
        "--tensor-parallel-size {}: {} has no GPU interconnect to split a model over; expected "
        "--tensor-parallel-size 1 or a GPU preset",
        n, plan.gpu.name));
  }
  try {
    plan.memory = plan_memory(plan.target, plan.draft, plan.gpu, request.context,
                              request.memory_utilization, n);
  } catch (const InvalidInput& e) {
    const std::optional<int64_t> fits =
        plan.gpu.interconnect_gbps > 0.0
            ? smallest_fitting_tensor_parallel(plan.target, plan.draft, plan.gpu, request.context,
                                               request.memory_utilization, n + 1)
            : std::nullopt;
    if (!fits) throw;
    const MemoryPlan m = plan_memory(plan.target, plan.draft, plan.gpu, request.context,
                                     request.memory_utilization, *fits);
    throw InvalidInput(fmt::format(
        "{}. Split over {} GPUs it fits: pass --tensor-parallel-size {} ({:.2f} + {:.2f} GB of "
        "weights per {}, room for {} sequences of {} tokens)",
        e.what(), *fits, *fits, m.target_weight_bytes / 1e9, m.draft_weight_bytes / 1e9,
        plan.gpu.name, m.max_sequences_with_draft, request.context));
  }
  plan.model = {.target = pass_profile(plan.target, n),
                .draft = pass_profile(plan.draft, n),
                .target_rates = roofline_rates(plan.gpu, plan.target.dtype),
                .draft_rates = roofline_rates(plan.gpu, plan.draft.dtype),
                .context = request.context};
  plan.alpha = request.alpha;
  plan.auto_gamma = request.gammas.empty();
  plan.columns = plan.auto_gamma ? kPlanAutoGammas : request.gammas;
  fill_speedups(request, plan);
  plan.break_even_batch_ignoring_memory =
      break_even_batch(plan.model, plan.alpha, request.gammas, kPlanMaxBreakEvenBatch);
  plan.batch1 = step_cost(plan.model, plan.alpha, 1, 1);
  if (plan.auto_gamma) plan.leviathan = optimal_gamma(plan.alpha, plan.batch1.c, kPlanMaxGamma);
  return plan;
}

}  // namespace speclab
