// The cost and memory planner (docs/architecture.md "core/plan"): Leviathan et al.'s expected
// emitted tokens E = (1 − α^{γ+1})/(1 − α) and gain E/(γc + 1) (docs/verifiers.md V1,
// proofs/expected_emitted.md), a roofline model of one forward pass, the speculative step built
// from it by batch size, and the VRAM budget of target + draft + KV cache.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "core/plan/hardware.hpp"

namespace speclab {

// ---- Leviathan's closed forms (docs/verifiers.md V1) --------------------------------------------

/// E[emitted per step] = Σ_{i=0..γ} α^i = (1 − α^{γ+1})/(1 − α); γ + 1 at α = 1.
/// Throws InvalidInput unless 0 ≤ α ≤ 1 and γ ≥ 0.
double expected_emitted(double alpha, int64_t gamma);

/// Expected verification rounds until every one of `batch` requests has emitted `tokens` tokens,
/// when a request with r tokens left drafts min(γ, r − 1), accepts each draft with probability α
/// independently up to the first rejection, and emits one token more (the correction or the
/// bonus): E[max over the batch of the rounds each request needs]. A finite run emits fewer
/// than E per round at its end, and a batch waits for its slowest request, so a batch of B
/// needs more rounds than tokens / E. Throws InvalidInput unless 0 ≤ α ≤ 1, γ ≥ 0, tokens ≥ 1
/// and batch ≥ 1.
double expected_rounds(double alpha, int64_t gamma, int64_t tokens, int64_t batch);

/// The same rounds by how many requests are still decoding: entry a (1 ≤ a ≤ batch) is the
/// expected number of rounds in which exactly a requests are active (entry 0 is 0); the entries
/// sum to expected_rounds. A batch's finished requests leave it, so its last rounds are smaller
/// passes: a run's time is Σ_a rounds[a] · T_step(a).
std::vector<double> expected_rounds_by_active(double alpha, int64_t gamma, int64_t tokens,
                                              int64_t batch);

/// Wall-clock gain over plain decoding when a draft step costs c target steps and a
/// verification pass costs one: E/(γc + 1). Throws InvalidInput for c < 0.
double walltime_gain(double alpha, int64_t gamma, double c);

struct GammaChoice {
  int64_t gamma = 0;
  double gain = 0.0;
};

/// The integer γ in [1, max_gamma] maximising walltime_gain (ties: the smaller γ).
GammaChoice optimal_gamma(double alpha, double c, int64_t max_gamma = 64);

// ---- roofline of one forward pass ---------------------------------------------------------------

/// What one forward pass of a model moves and computes, independent of the hardware.
struct PassProfile {
  std::string name;
  double weight_bytes_read = 0.0;   ///< streamed once per pass, whatever the batch
  double flops_per_token = 0.0;     ///< per scored token (≈ 2 × matmul parameters)
  double kv_bytes_per_token = 0.0;  ///< KV cache read per context token per sequence
  double attention_flops_per_context_token = 0.0;  ///< per scored token and context token
  double weight_bytes_stored = 0.0;                ///< resident in memory (VRAM table)
  int64_t vocab = 0;  ///< logits per scored row (the sampling pipeline)
  WeightDtype compute_dtype = WeightDtype::kFp16;  ///< selects the FLOP rate
  int64_t tensor_parallel = 1;                     ///< GPUs the model is split over
  /// Bytes each GPU sends per scored token in the pass's all-reduces (0 on one GPU).
  double allreduce_bytes_per_token = 0.0;
};

/// Checks that `model` splits over `n` GPUs as vLLM's tensor parallelism splits it: n ≥ 1
/// divides num_attention_heads, and n divides num_key_value_heads or is a multiple of it (the
/// KV heads are then replicated). Throws InvalidInput naming --tensor-parallel-size otherwise.
void check_tensor_parallel(const ModelSpec& model, int64_t n);

/// KV-cache bytes per token of one sequence on each of `n` GPUs: each holds max(1, kv_heads / n)
/// KV heads.
int64_t kv_bytes_per_token_per_gpu(const ModelSpec& model, int64_t n);

/// Megatron-style tensor parallelism (vLLM's --tensor-parallel-size): the column- and
/// row-parallel linears, the embedding, the LM head and the KV heads split over n GPUs, one
/// all-reduce of the hidden state after attention and one after the MLP of every layer. The
/// profile of one GPU: weights, FLOPs and attention work ÷ n, KV bytes per GPU
/// (kv_bytes_per_token_per_gpu), and per scored token a ring all-reduce of hidden × activation
/// bytes (16-bit; 32 for an fp32 model) twice per layer, each GPU sending 2(n−1)/n of it:
///   allreduce_bytes_per_token = 2 · layers · 2(n−1)/n · hidden · activation bytes.
PassProfile pass_profile(const ModelSpec& model, int64_t tensor_parallel = 1);

/// Rates the roofline runs at (from a HardwareSpec, or set directly for a host model).
struct RooflineRates {
  double bytes_per_second = 0.0;
  double flops_per_second = 0.0;
  double seconds_per_logit = 0.0;  ///< sampling pipeline per logit (0: in the bytes term)
  double launch_overhead_seconds = 0.0;
  bool overlapped = true;  ///< max(memory, compute); false: memory + compute (HardwareSpec)
  double interconnect_bytes_per_second = 0.0;  ///< GPU-to-GPU link, per direction (all-reduces)
};

/// Rates of `hardware` for arithmetic in `dtype`.
RooflineRates roofline_rates(const HardwareSpec& hardware, WeightDtype dtype);

struct PassTime {
  double seconds = 0.0;          ///< max(memory, compute) (or the sum) + sampling + launch overhead
  double memory_seconds = 0.0;   ///< bytes / bandwidth
  double compute_seconds = 0.0;  ///< FLOPs / peak
  double sampling_seconds = 0.0;
  double allreduce_seconds = 0.0;  ///< tensor parallelism's all-reduces, after the roofline
  double bytes = 0.0, flops = 0.0;
  bool compute_bound = false;
};

/// T(b, m, context): `batch` sequences each scoring `tokens` positions (m = 1 a decode or draft
/// step, m = γ+1 a verification) over a KV cache of `context` tokens per sequence:
///   bytes = weights + b·context·kv_bytes_per_token (+ b·m·V·8 fp32 logits in and probs out,
///           where seconds_per_logit is 0)
///   FLOPs = b·m·(flops_per_token + context·attention_flops_per_context_token)
///   T = max(bytes / bandwidth, FLOPs / peak) + b·m·V·seconds_per_logit + launch overhead
///       + b·m·allreduce_bytes_per_token / interconnect bandwidth
/// (the sum of the first two instead of the max where rates.overlapped is false). The all-reduces
/// wait on the layer before them, so they add rather than overlap. Throws InvalidInput for a
/// tensor-parallel profile on hardware without an interconnect.
PassTime forward_time(const PassProfile& model, const RooflineRates& rates, int64_t batch,
                      int64_t tokens, int64_t context);

// ---- the speculative step -----------------------------------------------------------------------

/// Time of the verifier over one step, per row of V probabilities it reads: both models' rows
/// of every request, b·(2γ + 1) rows, each read once (docs/verifiers.md V1) — at the bandwidth, or
/// at the sampling pipeline's rate where the host runs it.
double verify_time(const RooflineRates& rates, int64_t vocab, int64_t batch, int64_t gamma);

struct StepCost {
  int64_t batch = 0, gamma = 0;
  double alpha = 0.0;
  double expected_emitted = 0.0;  ///< per sequence and step, bonus included
  double plain_seconds = 0.0;     ///< T_target(b, 1): one plain token for each of b sequences
  double draft_seconds = 0.0;     ///< γ·T_draft(b, 1)
  double target_seconds = 0.0;    ///< T_target(b, γ+1)
  double verify_seconds = 0.0;
  double step_seconds = 0.0;          ///< the sum of the three
  double speedup = 0.0;               ///< E·T_target(b,1) / step_seconds (tokens/s ratio)
  bool target_compute_bound = false;  ///< the verification pass is past the ridge point
  double c = 0.0;                     ///< T_draft(b,1) / T_target(b,1), Leviathan's c at this batch
};

/// Everything that prices a step: both profiles and the rates each runs at.
struct PairCostModel {
  PassProfile target, draft;
  RooflineRates target_rates, draft_rates;
  int64_t context = 0;  ///< KV-cache length per sequence
};

/// A step of γ ≥ 1 draft tokens at batch b: γ·T_draft(b,1) + T_target(b,γ+1) + verifier, against
/// plain decoding's T_target(b,1) per token (per sequence, E tokens per step).
StepCost step_cost(const PairCostModel& model, double alpha, int64_t batch, int64_t gamma);

// ---- a run priced round by round ---------------------------------------------------------------

/// What a plain step and a speculative round cost with `active` requests decoding, from
/// whichever source prices them: the roofline (RooflineRoundCosts) or timings of the pair itself
/// (MeasuredRoundCosts). Every prediction of a run's speedup (predict_run) reads its costs here.
class RoundCosts {
 public:
  virtual ~RoundCosts() = default;
  /// One plain decoding step: a target pass of one position per request and the engine's work
  /// around it.
  virtual double plain_step(int64_t active) const = 0;
  /// A round's drafting: γ draft steps.
  virtual double drafting(int64_t active, int64_t gamma) const = 0;
  /// The target's verification pass, γ + 1 positions per request.
  virtual double verify_pass(int64_t active, int64_t gamma) const = 0;
  /// Per round, the engine's work outside the model calls (sampling the drafts, the verifier,
  /// bookkeeping).
  virtual double round_overhead(int64_t active, int64_t gamma) const = 0;
  /// drafting + verify_pass + round_overhead.
  double round(int64_t active, int64_t gamma) const {
    return drafting(active, gamma) + verify_pass(active, gamma) + round_overhead(active, gamma);
  }
};

/// The roofline's costs (forward_time, verify_time) of a PairCostModel: what `speclab plan`
/// predicts for a GPU preset or for this host's measured rates.
class RooflineRoundCosts final : public RoundCosts {
 public:
  explicit RooflineRoundCosts(const PairCostModel& model) : model_(model) {}
  double plain_step(int64_t active) const override;
  double drafting(int64_t active, int64_t gamma) const override;
  double verify_pass(int64_t active, int64_t gamma) const override;
  double round_overhead(int64_t active, int64_t gamma) const override;

 private:
  PairCostModel model_;
};

/// A round timed on a pair at one γ: seconds of its drafting, its verification call and its
/// work outside the model calls.
struct MeasuredRound {
  int64_t gamma = 0;
  double drafting = 0.0, verify_pass = 0.0, overhead = 0.0;
};

/// Costs timed on a pair at one batch size: a plain step's seconds and rounds by γ.
struct MeasuredBatchCost {
  int64_t batch = 0;
  double plain_step = 0.0;
  std::vector<MeasuredRound> rounds;
};

/// Costs timed at some batch sizes, linear in the batch between two of them and constant
/// outside them (the smallest batch's costs below it: weight streaming dominates there). Every
/// entry must hold the γ it is asked for: InvalidInput names the batch and γ otherwise, and for
/// no entries, a batch below 1, a repeated batch or a negative or non-finite time.
class MeasuredRoundCosts final : public RoundCosts {
 public:
  explicit MeasuredRoundCosts(std::vector<MeasuredBatchCost> entries);
  double plain_step(int64_t active) const override;
  double drafting(int64_t active, int64_t gamma) const override;
  double verify_pass(int64_t active, int64_t gamma) const override;
  double round_overhead(int64_t active, int64_t gamma) const override;

 private:
  template <typename Term>
  double interpolate(int64_t active, Term term) const;
  std::vector<MeasuredBatchCost> entries_;  ///< by batch
};

/// A run's predicted speedup and the terms it was built from.
struct RunPrediction {
  /// tokens · plain_step(batch) over Σ_a rounds[a] · round(a, γ): the finite run, in which a
  /// batch waits for its slowest request and finished requests leave it
  /// (expected_rounds_by_active).
  double speedup = 0.0;
  /// E · plain_step(batch) / round(batch, γ): the per-round model, the limit of long runs.
  double per_round_speedup = 0.0;
  double expected_emitted = 0.0;  ///< E per request and round
  double rounds = 0.0;            ///< expected rounds of the run
  double plain_seconds = 0.0, speculative_seconds = 0.0;
  /// At the full batch, in plain steps: c = a draft step (drafting / γ), r = the verification
  /// pass, o = a round's overhead (so per_round_speedup = E / (γc + r + o)).
  double c = 0.0, r = 0.0, o = 0.0;
};

/// The prediction for `batch` requests of `tokens` tokens each at acceptance rate α with γ
/// drafts per round, over plain decoding of the same batch (tokens plain steps at the full batch).
/// Throws InvalidInput for γ < 1 and as expected_rounds_by_active.
RunPrediction predict_run(const RoundCosts& costs, double alpha, int64_t batch, int64_t gamma,
                          int64_t tokens);

/// predict_run(RooflineRoundCosts(model), …).speedup.
double finite_run_speedup(const PairCostModel& model, double alpha, int64_t batch, int64_t gamma,
                          int64_t tokens);

/// The γ in `gammas` (or 1..max_gamma when empty) with the largest speedup at batch b.
StepCost best_step(const PairCostModel& model, double alpha, int64_t batch,
                   const std::vector<int64_t>& gammas, int64_t max_gamma = 32);

/// The smallest batch in [1, max_batch] at which the best speedup is ≤ 1 (speculation no longer
/// pays); nullopt when it still pays at max_batch.
std::optional<int64_t> break_even_batch(const PairCostModel& model, double alpha,
                                        const std::vector<int64_t>& gammas,
                                        int64_t max_batch = 4096);

// ---- VRAM ---------------------------------------------------------------------------------------

struct MemoryPlan {
  int64_t tensor_parallel = 1;  ///< GPUs; every figure below is per GPU
  double capacity_bytes = 0.0;  ///< device memory
  double utilization = 0.0;     ///< fraction the engine may use (vLLM --gpu-memory-utilization)
  double budget_bytes = 0.0;    ///< capacity × utilization
  double target_weight_bytes = 0.0, draft_weight_bytes = 0.0;
  double target_workspace_bytes = 0.0, draft_workspace_bytes = 0.0;
  int64_t target_kv_bytes_per_token = 0, draft_kv_bytes_per_token = 0;
  int64_t context = 0;
  double kv_budget_without_draft = 0.0;     ///< budget − target weights − target workspace
  double kv_budget_with_draft = 0.0;        ///< also less the draft's weights and workspace
  int64_t max_sequences_without_draft = 0;  ///< ⌊kv budget / (context × target KV per token)⌋
  int64_t max_sequences_with_draft = 0;  ///< ⌊kv budget / (context × (target + draft) KV/token)⌋
  double headroom_with_draft = 0.0;  ///< KV budget left after max_sequences_with_draft sequences
  int64_t sequences_lost_to_draft() const {
    return max_sequences_without_draft - max_sequences_with_draft;
  }
};

/// Tokens of the activation workspace the planner reserves per model: one prefill chunk of this
/// many tokens (vLLM's chunked-prefill max_num_batched_tokens default) ...
inline constexpr int64_t kWorkspaceTokens = 2048;
/// ... plus fp32 logits and probabilities for this many rows (vLLM's max_num_seqs default).
inline constexpr int64_t kWorkspaceLogitRows = 256;

/// The VRAM budget of target + draft on `gpu` with sequences of `context` tokens, both models
/// split over `tensor_parallel` GPUs (vLLM runs the draft at the target's tensor-parallel size):
/// per GPU, weights ÷ n, the whole workspace (not split: an upper bound) and
/// kv_bytes_per_token_per_gpu. Throws InvalidInput when the weights and workspace do not fit
/// (saying by how much) or when not even one sequence's KV cache fits, and for a utilisation
/// outside (0, 1], context < 1 or a tensor-parallel size the models cannot split into.
MemoryPlan plan_memory(const ModelSpec& target, const ModelSpec& draft, const HardwareSpec& gpu,
                       int64_t context, double utilization, int64_t tensor_parallel = 1);

/// The smallest tensor-parallel size in [from, 64] that both models split into and at which
/// plan_memory fits; nullopt when none does.
std::optional<int64_t> smallest_fitting_tensor_parallel(const ModelSpec& target,
                                                        const ModelSpec& draft,
                                                        const HardwareSpec& gpu, int64_t context,
                                                        double utilization, int64_t from = 1);

}  // namespace speclab
