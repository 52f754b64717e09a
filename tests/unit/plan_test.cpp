// The whole plan of core/plan/plan (what `speclab plan` prints): its grid and best steps agree
// with the step model they are built from, a list of γ replaces the automatic search, and the
// preset and vocabulary errors come from the library, not the command line.
#include "core/plan/plan.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "core/base/error.hpp"
#include "core/plan/cost_model.hpp"

namespace speclab {
namespace {

using ::testing::HasSubstr;

PlanRequest rtx3090_request() {
  return {.gpu = find_gpu("rtx3090"),
          .target = "llama3-8b",
          .draft = "llama3.2-1b",
          .alpha = 0.8,
          .batches = {1, 8, 64}};
}

TEST(Plan, GridAndBestStepsComeFromTheStepModel) {
  const PlanResult plan = compute_plan(rtx3090_request());
  EXPECT_TRUE(plan.auto_gamma);
  EXPECT_EQ(plan.columns, kPlanAutoGammas);
  ASSERT_EQ(plan.best.size(), 3u);
  ASSERT_EQ(plan.speedups.size(), 3u);
  for (size_t i = 0; i < plan.best.size(); ++i) {
    const int64_t batch = rtx3090_request().batches[i];
    EXPECT_EQ(plan.best[i].batch, batch);
    EXPECT_EQ(plan.best[i].speedup, best_step(plan.model, 0.8, batch, {}, kPlanMaxGamma).speedup);
    ASSERT_EQ(plan.speedups[i].size(), plan.columns.size());
    for (size_t j = 0; j < plan.columns.size(); ++j) {
      EXPECT_EQ(plan.speedups[i][j], step_cost(plan.model, 0.8, batch, plan.columns[j]).speedup);
    }
  }
  // The speed-only break-even batch lies past what fits beside the draft: memory binds.
  EXPECT_EQ(plan.break_even_batch_ignoring_memory,
            break_even_batch(plan.model, 0.8, {}, kPlanMaxBreakEvenBatch));
  ASSERT_TRUE(plan.break_even_batch_ignoring_memory.has_value());
  EXPECT_GT(*plan.break_even_batch_ignoring_memory, plan.memory.max_sequences_with_draft);
  EXPECT_EQ(plan.break_even_batch(), std::nullopt);
  EXPECT_EQ(plan.break_even_limit(), PlanResult::BreakEvenLimit::kMemory);
  EXPECT_EQ(plan.leviathan.gamma, optimal_gamma(0.8, plan.batch1.c, kPlanMaxGamma).gamma);
  EXPECT_TRUE(plan.fits_memory(1));
  EXPECT_FALSE(plan.fits_memory(plan.memory.max_sequences_with_draft + 1));
}

TEST(Plan, GammaListGivesTheColumnsAndNoLeviathanOptimum) {
  PlanRequest request = rtx3090_request();
  request.gammas = {2, 5};
  const PlanResult plan = compute_plan(request);
  EXPECT_FALSE(plan.auto_gamma);
  EXPECT_EQ(plan.columns, (std::vector<int64_t>{2, 5}));
  for (const StepCost& best : plan.best) EXPECT_TRUE(best.gamma == 2 || best.gamma == 5);
  EXPECT_EQ(plan.leviathan.gamma, 0);
}

TEST(Plan, LaunchOverheadReplacesThePresets) {
  PlanRequest request = rtx3090_request();
  request.launch_overhead_seconds = 5e-6;
  EXPECT_EQ(compute_plan(request).gpu.launch_overhead_seconds, 5e-6);
  EXPECT_EQ(compute_plan(rtx3090_request()).gpu.launch_overhead_seconds, kGpuLaunchOverheadSeconds);
}

TEST(Plan, RejectsADraftOfAnotherVocabulary) {
  PlanRequest request = rtx3090_request();
  request.target = "llama2-13b-gptq";
  try {
    compute_plan(request);
    FAIL() << "no InvalidInput thrown";
  } catch (const InvalidInput& e) {
    EXPECT_THAT(e.what(), HasSubstr("speculative decoding needs the same vocabulary"));
  }
}

}  // namespace
}  // namespace speclab
