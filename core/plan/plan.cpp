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

PlanResult compute_plan(const PlanRequest& request) {
  PlanResult plan;
  plan.gpu = request.gpu;
  if (request.launch_overhead_seconds) {
    plan.gpu.launch_overhead_seconds = *request.launch_overhead_seconds;
  }
  plan.target = find_llm(request.target);
  plan.draft = find_llm(request.draft);
  check_same_vocabulary(plan.target, plan.draft);
  plan.memory =
      plan_memory(plan.target, plan.draft, plan.gpu, request.context, request.memory_utilization);
  plan.model = {.target = pass_profile(plan.target),
                .draft = pass_profile(plan.draft),
                .target_rates = roofline_rates(plan.gpu, plan.target.dtype),
                .draft_rates = roofline_rates(plan.gpu, plan.draft.dtype),
                .context = request.context};
  plan.alpha = request.alpha;
  plan.auto_gamma = request.gammas.empty();
  plan.columns = plan.auto_gamma ? kPlanAutoGammas : request.gammas;
  fill_speedups(request, plan);
  plan.break_even_batch =
      break_even_batch(plan.model, plan.alpha, request.gammas, kPlanMaxBreakEvenBatch);
  plan.batch1 = step_cost(plan.model, plan.alpha, 1, 1);
  if (plan.auto_gamma) plan.leviathan = optimal_gamma(plan.alpha, plan.batch1.c, kPlanMaxGamma);
  return plan;
}

}  // namespace speclab
