// A whole plan for one target/draft pair on one GPU, as `speclab plan` reports it: the predicted
// speedup over plain decoding by γ and batch, the best γ per batch, the break-even batch,
// Leviathan's batch-free optimum for comparison and the VRAM budget. Built from the roofline
// step model and the memory plan of cost_model.hpp.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/plan/cost_model.hpp"
#include "core/plan/hardware.hpp"

namespace speclab {

/// With automatic γ the speedup grid has these columns ...
inline const std::vector<int64_t> kPlanAutoGammas = {1, 2, 3, 4, 5, 6, 8};
/// ... and the best γ is searched over 1..kPlanMaxGamma.
inline constexpr int64_t kPlanMaxGamma = 32;
/// The break-even search gives up past this batch.
inline constexpr int64_t kPlanMaxBreakEvenBatch = 4096;

struct PlanRequest {
  /// The GPU (find_gpu, or find_hardware of core/probe/this_machine.hpp for this host).
  HardwareSpec gpu;
  std::string target, draft;  ///< model preset names (find_llm)
  /// The target and the draft themselves (e.g. read_hf_config of --target-config and
  /// --draft-config), instead of preset names.
  std::optional<ModelSpec> target_model, draft_model;
  int64_t tensor_parallel = 1;  ///< GPUs both models are split over (vLLM --tensor-parallel-size)
  double alpha = 0.0;           ///< acceptance rate, 0 < α < 1
  std::vector<int64_t> gammas;  ///< empty: the best γ per batch (automatic)
  std::vector<int64_t> batches;
  int64_t context = 2048;  ///< KV-cache length per sequence
  double memory_utilization = 0.9;
  /// Replaces the GPU preset's fixed cost per forward pass where set.
  std::optional<double> launch_overhead_seconds;
};

struct PlanResult {
  HardwareSpec gpu;  ///< the preset, with the request's launch overhead
  ModelSpec target, draft;
  PairCostModel model;
  MemoryPlan memory;
  double alpha = 0.0;
  bool auto_gamma = true;
  std::vector<int64_t> columns;               ///< γ of the grid's columns
  std::vector<StepCost> best;                 ///< per batch: the step at the best γ
  std::vector<std::vector<double>> speedups;  ///< [batch][column]
  /// The smallest batch whose best speedup is ≤ 1, memory aside (nullopt: none up to
  /// kPlanMaxBreakEvenBatch).
  std::optional<int64_t> break_even_batch_ignoring_memory;
  StepCost batch1;        ///< batch 1, γ = 1: Leviathan's c from the batch-1 passes
  GammaChoice leviathan;  ///< his optimal γ at that c (automatic γ only)

  /// Whether `batch` sequences of the plan's context fit in VRAM beside the draft.
  bool fits_memory(int64_t batch) const { return batch <= memory.max_sequences_with_draft; }

  /// Which limit ends the batches speculation pays at: kSpeedup (the speedup falls to 1 at a
  /// batch that fits), kMemory (no more sequences fit beside the draft before it does: past that a
  /// batch cannot be served with a draft at all) or kSearch (neither within
  /// kPlanMaxBreakEvenBatch).
  enum class BreakEvenLimit { kSpeedup, kMemory, kSearch };
  BreakEvenLimit break_even_limit() const {
    const auto& even = break_even_batch_ignoring_memory;
    if (even && fits_memory(*even)) return BreakEvenLimit::kSpeedup;
    return memory.max_sequences_with_draft < kPlanMaxBreakEvenBatch ? BreakEvenLimit::kMemory
                                                                    : BreakEvenLimit::kSearch;
  }
  /// The smallest batch that fits beside the draft and whose best speedup is ≤ 1; nullopt: every
  /// batch that fits gains.
  std::optional<int64_t> break_even_batch() const {
    return break_even_limit() == BreakEvenLimit::kSpeedup ? break_even_batch_ignoring_memory
                                                          : std::nullopt;
  }
};

/// "speedup", "memory" or "search".
std::string_view break_even_limit_name(PlanResult::BreakEvenLimit limit);

/// The plan of `request`. Throws InvalidInput for an unknown preset, a draft whose vocabulary
/// differs from the target's, a tensor-parallel size the models cannot split into or on hardware
/// without an interconnect, or models that do not fit the GPU (plan_memory) — then naming the
/// smallest --tensor-parallel-size at which they fit, where one does.
PlanResult compute_plan(const PlanRequest& request);

}  // namespace speclab
