// `speclab plan`: the cost and memory planner (core/plan/cost_model.hpp) on the command line —
// speculative-decoding speedup by γ and batch size on a GPU preset (docs/verifiers.md V1 closed
// forms inside a roofline step model), the optimal γ per batch, the break-even batch and the VRAM
// budget; `--validate` checks the model against measured runs on this machine. The plan itself
// comes from core/plan/plan.hpp; this file parses the flags and prints or writes the result.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "bench/benches.hpp"
#include "cli/command.hpp"
#include "cli/json.hpp"
#include "core/base/error.hpp"
#include "core/io/hdf5_file.hpp"
#include "core/plan/cost_model.hpp"
#include "core/plan/hardware.hpp"
#include "core/plan/plan.hpp"
#include "core/probe/this_machine.hpp"

namespace speclab::cli {

namespace {

constexpr double kGB = 1e9;

struct PlanOptions {
  std::string gpu, target, draft;
  std::string target_config, draft_config;
  int64_t tensor_parallel = 1;
  std::optional<double> alpha;
  std::string alpha_from;
  std::string gamma = "auto";
  std::vector<int64_t> batch = {1, 2, 4, 8, 16, 32, 64, 128};
  int64_t context = 2048;
  double memory_utilization = 0.9;
  std::optional<double> overhead_us;
  std::string out;
  bool json = false;
  bool validate = false;
  // --validate only (bench/plan_validate.cpp); --target, --draft, --gamma and --batch name its
  // registry models and grid there.
  int64_t tokens = PlanValidateOptions{}.tokens;
  int64_t calibration_tokens = PlanValidateOptions{}.calibration_tokens;
  int rounds = PlanValidateOptions{}.rounds;
  int max_rounds = PlanValidateOptions{}.max_rounds;
  double precision = PlanValidateOptions{}.precision;
  double temperature = PlanValidateOptions{}.temperature;
  std::string workload;
  bool batch_given = false;
};

struct Alpha {
  double value = 0.0;
  std::string source;  // "--alpha" or "FILE:attribute"
};

void check_alpha_open(double alpha, const std::string& source) {
  if (!(alpha > 0.0 && alpha < 1.0)) {
    throw InvalidInput(fmt::format(
        "acceptance rate from {} is {}; expected 0 < alpha < 1 (alpha = 1 would make the draft "
        "the target, alpha = 0 never accepts)",
        source, alpha));
  }
}

// The α of a speclab HDF5 file: `speclab run` writes acceptance_rate and alpha_estimate
// (experiments/results.cpp), `speclab demo` writes alpha_mean_beta. alpha_sum_min is a sum over
// tested positions, so it is divided by tested_positions.
Alpha alpha_from_file(const std::string& path) {
  const Hdf5Reader file(path);
  for (const char* name : {"acceptance_rate", "alpha_estimate", "alpha_mean_beta", "alpha"}) {
    if (!file.has_attribute(name)) continue;
    const double a = file.read_attribute<double>(name);
    if (std::isnan(a)) continue;  // a plain-decoding run has no acceptance rate
    const std::string source = fmt::format("{}:{}", path, name);
    check_alpha_open(a, source);
    return {a, source};
  }
  if (file.has_attribute("alpha_sum_min") && file.has_attribute("tested_positions")) {
    const double tested = static_cast<double>(file.read_attribute<int64_t>("tested_positions"));
    if (tested > 0) {
      const double a = file.read_attribute<double>("alpha_sum_min") / tested;
      const std::string source = fmt::format("{}:alpha_sum_min/tested_positions", path);
      check_alpha_open(a, source);
      return {a, source};
    }
  }
  throw InvalidInput(fmt::format(
      "{}: no acceptance rate found; expected a root attribute acceptance_rate or alpha_estimate "
      "(speclab run, speculative), alpha_mean_beta (speclab demo) or alpha",
      path));
}

std::vector<int64_t> parse_gammas(const std::string& text) {
  if (text == "auto") return {};
  std::vector<int64_t> out;
  size_t pos = 0;
  while (pos <= text.size()) {
    const size_t comma = std::min(text.find(',', pos), text.size());
    const std::string item = text.substr(pos, comma - pos);
    size_t used = 0;
    int64_t g = 0;
    try {
      g = std::stoll(item, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (item.empty() || used != item.size() || g < 1) {
      throw InvalidInput(fmt::format(
          "--gamma '{}': '{}' is not an integer ≥ 1; expected auto or a list such as 2,4,8", text,
          item));
    }
    out.push_back(g);
    pos = comma + 1;
  }
  return out;
}

// `plan --validate`'s options: the pair and grid from --target, --draft, --gamma and --batch
// (registry names and lists; the validation's defaults where absent). The planner's own options
// have no meaning for a measurement of this machine and are refused.
PlanValidateOptions validate_options(const PlanOptions& o) {
  if (!o.gpu.empty() || o.alpha || !o.alpha_from.empty() || !o.target_config.empty() ||
      !o.draft_config.empty() || !o.out.empty()) {
    throw InvalidInput(
        "--validate measures this machine with the pair's own runs: it takes --target, "
        "--draft (registry models, `speclab models`), --gamma, --batch, --tokens, "
        "--calibration-tokens, --rounds, --max-rounds, --precision, --temperature, --workload "
        "and --json, not --gpu, "
        "--alpha, --alpha-from, --target-config, --draft-config or --out");
  }
  PlanValidateOptions v;
  if (!o.target.empty()) v.target = o.target;
  if (!o.draft.empty()) v.draft = o.draft;
  if (o.gamma != "auto") v.gammas = parse_gammas(o.gamma);
  if (o.batch_given) v.batches = o.batch;
  v.tokens = o.tokens;
  v.calibration_tokens = o.calibration_tokens;
  v.rounds = o.rounds;
  v.max_rounds = o.max_rounds;
  v.precision = o.precision;
  v.temperature = o.temperature;
  v.workload = o.workload;
  v.json = o.json;
  return v;
}

void check_plan_options(const PlanOptions& o) {
  if (o.gpu.empty() || (o.target.empty() && o.target_config.empty()) ||
      (o.draft.empty() && o.draft_config.empty())) {
    throw InvalidInput(
        "plan needs --gpu, --target (or --target-config) and --draft (or --draft-config), or "
        "--validate; see --help");
  }
  if (!o.target.empty() && !o.target_config.empty()) {
    throw InvalidInput("plan takes one of --target PRESET and --target-config config.json");
  }
  if (!o.draft.empty() && !o.draft_config.empty()) {
    throw InvalidInput("plan takes one of --draft PRESET and --draft-config config.json");
  }
  if (o.alpha.has_value() == !o.alpha_from.empty()) {
    throw InvalidInput("plan needs exactly one of --alpha A and --alpha-from RESULTS.h5");
  }
  for (int64_t b : o.batch) {
    if (b < 1) throw InvalidInput(fmt::format("--batch value {} must be ≥ 1", b));
  }
  if (o.overhead_us && !(*o.overhead_us >= 0.0)) {
    throw InvalidInput(fmt::format("--overhead-us is {}; expected ≥ 0", *o.overhead_us));
  }
}

Alpha resolve_alpha(const PlanOptions& o) {
  if (!o.alpha) return alpha_from_file(o.alpha_from);
  check_alpha_open(*o.alpha, "--alpha");
  return {*o.alpha, "--alpha"};
}

PlanRequest plan_request(const PlanOptions& o, const Alpha& alpha) {
  PlanRequest request{
      .gpu = find_hardware(o.gpu),
      .target = o.target,
      .draft = o.draft,
      .target_model = o.target_config.empty()
                          ? std::nullopt
                          : std::optional<ModelSpec>(read_hf_config(o.target_config)),
      .draft_model = o.draft_config.empty()
                         ? std::nullopt
                         : std::optional<ModelSpec>(read_hf_config(o.draft_config)),
      .tensor_parallel = o.tensor_parallel,
      .alpha = alpha.value,
      .gammas = parse_gammas(o.gamma),
      .batches = o.batch,
      .context = o.context,
      .memory_utilization = o.memory_utilization};
  if (o.overhead_us) request.launch_overhead_seconds = *o.overhead_us * 1e-6;
  return request;
}

// rows/*: the best step of every batch; grid/*: the speedup of every batch and γ column.
void write_plan_datasets(Hdf5Writer& out, const PlanOptions& o, const PlanResult& plan) {
  const auto n = static_cast<int64_t>(o.batch.size());
  const auto n_columns = static_cast<int64_t>(plan.columns.size());
  std::vector<int64_t> gamma_col, fits_col;
  std::vector<double> speedup_col, emitted_col, step_col, plain_col, flat_grid;
  for (size_t i = 0; i < plan.best.size(); ++i) {
    const StepCost& r = plan.best[i];
    gamma_col.push_back(r.gamma);
    speedup_col.push_back(r.speedup);
    emitted_col.push_back(r.expected_emitted);
    step_col.push_back(r.step_seconds);
    plain_col.push_back(r.plain_seconds);
    fits_col.push_back(plan.fits_memory(o.batch[i]) ? 1 : 0);
    flat_grid.insert(flat_grid.end(), plan.speedups[i].begin(), plan.speedups[i].end());
  }
  const int64_t shape_n[] = {n}, shape_c[] = {n_columns}, shape_grid[] = {n, n_columns};
  out.write("rows/batch", std::span<const int64_t>(o.batch), shape_n);
  out.write("rows/gamma", std::span<const int64_t>(gamma_col), shape_n);
  out.write("rows/speedup", std::span<const double>(speedup_col), shape_n);
  out.write("rows/expected_emitted", std::span<const double>(emitted_col), shape_n);
  out.write("rows/step_seconds", std::span<const double>(step_col), shape_n);
  out.write("rows/plain_token_seconds", std::span<const double>(plain_col), shape_n);
  out.write("rows/fits_memory", std::span<const int64_t>(fits_col), shape_n);
  out.write("grid/gamma", std::span<const int64_t>(plan.columns), shape_c);
  out.write("grid/speedup", std::span<const double>(flat_grid), shape_grid);
}

void write_plan_attributes(Hdf5Writer& out, const PlanOptions& o, const Alpha& alpha,
                           const PlanResult& plan) {
  const MemoryPlan& mem = plan.memory;
  out.write_attribute("schema", "speclab.plan");
  out.write_attribute<int64_t>("schema_version", 1);
  out.write_attribute("gpu", plan.gpu.name);
  out.write_attribute("target", plan.target.name);
  out.write_attribute("draft", plan.draft.name);
  out.write_attribute<int64_t>("tensor_parallel_size", plan.memory.tensor_parallel);
  out.write_attribute<double>("alpha", alpha.value);
  out.write_attribute("alpha_source", alpha.source);
  out.write_attribute<int64_t>("context", o.context);
  out.write_attribute<double>("memory_utilization", o.memory_utilization);
  out.write_attribute("gamma_mode", plan.auto_gamma ? "auto" : "list");
  out.write_attribute<int64_t>("break_even_batch",
                               plan.break_even_batch() ? *plan.break_even_batch() : -1);
  out.write_attribute<int64_t>(
      "break_even_batch_ignoring_memory",
      plan.break_even_batch_ignoring_memory ? *plan.break_even_batch_ignoring_memory : -1);
  out.write_attribute("break_even_limit", break_even_limit_name(plan.break_even_limit()));
  out.write_attribute<double>("target_weights_gb", mem.target_weight_bytes / kGB);
  out.write_attribute<double>("draft_weights_gb", mem.draft_weight_bytes / kGB);
  out.write_attribute<int64_t>("target_kv_bytes_per_token", mem.target_kv_bytes_per_token);
  out.write_attribute<int64_t>("draft_kv_bytes_per_token", mem.draft_kv_bytes_per_token);
  out.write_attribute<int64_t>("max_sequences_without_draft", mem.max_sequences_without_draft);
  out.write_attribute<int64_t>("max_sequences_with_draft", mem.max_sequences_with_draft);
}

void write_plan(const PlanOptions& o, const Alpha& alpha, const PlanResult& plan) {
  Hdf5Writer out{std::filesystem::path(o.out)};
  write_plan_datasets(out, o, plan);
  write_plan_attributes(out, o, alpha, plan);
  out.commit();
}

Json plan_json_rows(const PlanResult& plan) {
  Json rows = Json::array();
  for (size_t i = 0; i < plan.best.size(); ++i) {
    const StepCost& r = plan.best[i];
    Json by_gamma = Json::object();
    for (size_t j = 0; j < plan.columns.size(); ++j) {
      by_gamma[fmt::format("{}", plan.columns[j])] = plan.speedups[i][j];
    }
    rows.push_back({{"batch", r.batch},
                    {"gamma", r.gamma},
                    {"speedup", r.speedup},
                    {"expected_emitted", r.expected_emitted},
                    {"c", r.c},
                    {"step_ms", 1e3 * r.step_seconds},
                    {"plain_token_ms", 1e3 * r.plain_seconds},
                    {"target_compute_bound", r.target_compute_bound},
                    {"fits_memory", plan.fits_memory(r.batch)},
                    {"speedup_by_gamma", by_gamma}});
  }
  return rows;
}

Json plan_json_vram(const MemoryPlan& mem) {
  return {{"capacity_gb", mem.capacity_bytes / kGB},
          {"budget_gb", mem.budget_bytes / kGB},
          {"target_weights_gb", mem.target_weight_bytes / kGB},
          {"draft_weights_gb", mem.draft_weight_bytes / kGB},
          {"target_workspace_gb", mem.target_workspace_bytes / kGB},
          {"draft_workspace_gb", mem.draft_workspace_bytes / kGB},
          {"target_kv_bytes_per_token", mem.target_kv_bytes_per_token},
          {"draft_kv_bytes_per_token", mem.draft_kv_bytes_per_token},
          {"kv_budget_without_draft_gb", mem.kv_budget_without_draft / kGB},
          {"kv_budget_with_draft_gb", mem.kv_budget_with_draft / kGB},
          {"max_sequences_without_draft", mem.max_sequences_without_draft},
          {"max_sequences_with_draft", mem.max_sequences_with_draft},
          {"sequences_lost_to_draft", mem.sequences_lost_to_draft()},
          {"headroom_gb", mem.headroom_with_draft / kGB}};
}

void print_plan_json(const PlanOptions& o, const Alpha& alpha, const PlanResult& plan) {
  print_json_line(
      {{"gpu", plan.gpu.name},
       {"target", plan.target.name},
       {"draft", plan.draft.name},
       {"tensor_parallel_size", plan.memory.tensor_parallel},
       {"interconnect", plan.gpu.interconnect},
       {"interconnect_gbps", plan.gpu.interconnect_gbps},
       {"alpha", alpha.value},
       {"alpha_source", alpha.source},
       {"context", o.context},
       {"memory_utilization", o.memory_utilization},
       {"gamma_mode", plan.auto_gamma ? "auto" : "list"},
       {"rows", plan_json_rows(plan)},
       {"break_even_batch", json_or_null(plan.break_even_batch())},
       {"break_even_limit", break_even_limit_name(plan.break_even_limit())},
       {"break_even_batch_ignoring_memory", json_or_null(plan.break_even_batch_ignoring_memory)},
       {"leviathan_batch1",
        {{"c", plan.batch1.c}, {"gamma", plan.leviathan.gamma}, {"gain", plan.leviathan.gain}}},
       {"vram", plan_json_vram(plan.memory)}});
}

void print_plan_header(const PlanOptions& o, const Alpha& alpha, const PlanResult& plan) {
  const MemoryPlan& mem = plan.memory;
  std::printf("speclab plan: target %s (%s, %.2f GB) + draft %s (%s, %.2f GB) on %s\n",
              plan.target.name.c_str(), std::string(weight_dtype_name(plan.target.dtype)).c_str(),
              plan.target.weight_bytes() / kGB, plan.draft.name.c_str(),
              std::string(weight_dtype_name(plan.draft.dtype)).c_str(),
              plan.draft.weight_bytes() / kGB, plan.gpu.description.c_str());
  std::printf(
      "  %.0f GiB, %.0f GB/s, %.1f TFLOP/s at the target's dtype; α = %.3f (%s); context %lld "
      "tokens; launch overhead %.0f µs per pass\n",
      plan.gpu.memory_gib, plan.gpu.bandwidth_gbps, plan.model.target_rates.flops_per_second / 1e12,
      alpha.value, alpha.source.c_str(), static_cast<long long>(o.context),
      plan.gpu.launch_overhead_seconds * 1e6);
  if (mem.tensor_parallel > 1) {
    std::printf(
        "  tensor parallel over %lld GPUs (weights, FLOPs and KV heads split; figures per GPU): "
        "%s at %.0f GB/s per direction, 2 all-reduces of the hidden state per layer\n",
        static_cast<long long>(mem.tensor_parallel), plan.gpu.interconnect.c_str(),
        plan.gpu.interconnect_gbps);
  }
}

void print_speedup_grid(const PlanOptions& o, const PlanResult& plan) {
  std::printf("\n  speedup over plain decoding by batch and γ\n  batch ");
  for (int64_t g : plan.columns) std::printf("  γ=%-4lld", static_cast<long long>(g));
  std::printf("\n");
  for (size_t i = 0; i < plan.best.size(); ++i) {
    std::printf("  %5lld ", static_cast<long long>(o.batch[i]));
    for (double v : plan.speedups[i]) std::printf("  %5.2fx", v);
    std::printf("\n");
  }
}

void print_best_steps(const PlanResult& plan) {
  std::printf(
      "\n  batch  best γ  speedup  E[emitted]  c(b)   step ms  plain ms/token  verify pass  "
      "fits VRAM\n");
  for (const StepCost& r : plan.best) {
    std::printf("  %5lld  %6lld  %6.2fx  %10.2f  %5.3f  %7.2f  %14.2f  %-11s  %s\n",
                static_cast<long long>(r.batch), static_cast<long long>(r.gamma), r.speedup,
                r.expected_emitted, r.c, 1e3 * r.step_seconds, 1e3 * r.plain_seconds,
                r.target_compute_bound ? "compute" : "memory",
                plan.fits_memory(r.batch) ? "yes" : "no");
  }
  std::string even;
  const auto& ignoring = plan.break_even_batch_ignoring_memory;
  switch (plan.break_even_limit()) {
    case PlanResult::BreakEvenLimit::kSpeedup:
      even = fmt::format("{} (the speedup binds: it falls to 1 before memory runs out)",
                         *plan.break_even_batch());
      break;
    case PlanResult::BreakEvenLimit::kMemory:
      even = fmt::format(
          "none\n    memory binds first: every batch that fits beside the draft ({} sequences) "
          "gains{}",
          plan.memory.max_sequences_with_draft,
          ignoring ? fmt::format(";\n    the speedup alone would fall to 1 at batch {}", *ignoring)
                   : std::string());
      break;
    case PlanResult::BreakEvenLimit::kSearch:
      even = fmt::format("none up to {}", kPlanMaxBreakEvenBatch);
      break;
  }
  std::printf("\n  break-even batch (smallest batch that fits and whose best speedup ≤ 1): %s\n",
              even.c_str());
  if (plan.auto_gamma) {
    std::printf("  Leviathan at batch 1 (c = %.3f, verification = one step): γ = %lld, %.2fx\n",
                plan.batch1.c, static_cast<long long>(plan.leviathan.gamma), plan.leviathan.gain);
  }
}

void print_vram(const PlanOptions& o, const PlanResult& plan) {
  const MemoryPlan& mem = plan.memory;
  std::printf(
      "\n  VRAM on %s%s (%.2f GB × %.2f utilisation = %.2f GB budget)\n", plan.gpu.name.c_str(),
      mem.tensor_parallel > 1 ? fmt::format(", per GPU of {}", mem.tensor_parallel).c_str() : "",
      mem.capacity_bytes / kGB, mem.utilization, mem.budget_bytes / kGB);
  std::printf("    target weights        %8.2f GB\n", mem.target_weight_bytes / kGB);
  std::printf("    draft weights         %8.2f GB\n", mem.draft_weight_bytes / kGB);
  std::printf("    workspace (t + d)     %8.2f GB\n",
              (mem.target_workspace_bytes + mem.draft_workspace_bytes) / kGB);
  std::printf("    KV cache per token    %8lld B target + %lld B draft\n",
              static_cast<long long>(mem.target_kv_bytes_per_token),
              static_cast<long long>(mem.draft_kv_bytes_per_token));
  std::printf("    KV budget             %8.2f GB without draft, %.2f GB with\n",
              mem.kv_budget_without_draft / kGB, mem.kv_budget_with_draft / kGB);
  std::printf(
      "    sequences of %lld tokens: %lld without draft, %lld with (%lld lost to the "
      "draft); headroom %.2f GB\n",
      static_cast<long long>(o.context), static_cast<long long>(mem.max_sequences_without_draft),
      static_cast<long long>(mem.max_sequences_with_draft),
      static_cast<long long>(mem.sequences_lost_to_draft()), mem.headroom_with_draft / kGB);
}

void run_plan(const PlanOptions& o) {
  if (o.validate) {
    run_plan_validate(validate_options(o));
    return;
  }
  check_plan_options(o);
  const Alpha alpha = resolve_alpha(o);
  const PlanResult plan = compute_plan(plan_request(o, alpha));
  if (!o.out.empty()) write_plan(o, alpha, plan);
  if (o.json) {
    print_plan_json(o, alpha, plan);
    return;
  }
  if (quiet()) return;
  print_plan_header(o, alpha, plan);
  print_speedup_grid(o, plan);
  print_best_steps(plan);
  print_vram(o, plan);
  if (!o.out.empty()) std::printf("\n  wrote %s\n", o.out.c_str());
}

void setup_plan(CLI::App& app) {
  auto* plan = app.add_subcommand(
      "plan", "Cost and VRAM planner: speculative-decoding speedup by γ and batch on a GPU preset");
  document_exit_statuses(*plan, {{2,
                                  "bad input: an unknown preset, a model that fits no GPU at "
                                  "this --tensor-parallel-size, a bad option value"}});
  auto o = std::make_shared<PlanOptions>();
  plan->add_option("--gpu", o->gpu, fmt::format("{}", fmt::join(gpu_preset_names(), ", ")));
  plan->add_option("--target", o->target, fmt::format("{}", fmt::join(llm_preset_names(), ", ")));
  plan->add_option("--target-config", o->target_config,
                   "the target from a Hugging Face config.json (instead of --target)");
  plan->add_option("--draft", o->draft, "draft model preset (same names)");
  plan->add_option("--draft-config", o->draft_config,
                   "the draft from a Hugging Face config.json (instead of --draft), e.g. for a "
                   "target of a family the presets lack");
  plan->add_option("--tensor-parallel-size", o->tensor_parallel,
                   "GPUs both models are split over, as vLLM's option (all-reduces at the GPU "
                   "preset's NVLink or PCIe bandwidth)")
      ->capture_default_str();
  plan->add_option("--alpha", o->alpha, "acceptance rate α in (0, 1)");
  plan->add_option("--alpha-from", o->alpha_from,
                   "read α from a speclab HDF5 result (speclab run or speclab demo)");
  plan->add_option("--gamma", o->gamma, "auto (optimal γ per batch) or a list, e.g. 2,4,8")
      ->capture_default_str();
  auto* batch = plan->add_option("--batch", o->batch, "batch sizes, e.g. 1,8,64")
                    ->delimiter(',')
                    ->capture_default_str();
  plan->add_option("--context", o->context, "KV-cache length per sequence (tokens)")
      ->capture_default_str();
  plan->add_option("--memory-utilization", o->memory_utilization,
                   "fraction of GPU memory the engine may use (vLLM --gpu-memory-utilization)")
      ->capture_default_str();
  plan->add_option("--overhead-us", o->overhead_us,
                   "fixed launch overhead per forward pass in µs (default 20 on GPUs)");
  plan->add_option("-o,--out", o->out, "also write the plan to this HDF5 file");
  plan->add_flag("--json", o->json, "print one JSON object");
  plan->add_flag("--validate", o->validate,
                 "predicted vs measured speedup of a pair on this machine (default "
                 "lsm-target/lsm-draft; --target/--draft name registry models there, --gamma "
                 "defaults to 1,2,4,6, --batch to 1,2,4,8,16)");
  plan->add_option("--tokens", o->tokens, "--validate: tokens per request of each timed run")
      ->capture_default_str();
  plan->add_option("--calibration-tokens", o->calibration_tokens,
                   "--validate: tokens per request of each calibration run")
      ->capture_default_str();
  plan->add_option("--rounds", o->rounds,
                   "--validate: interleaved rounds at least (the interval is their spread)")
      ->capture_default_str();
  plan->add_option("--max-rounds", o->max_rounds,
                   "--validate: and at most, while an interval is wider than --precision")
      ->capture_default_str();
  plan->add_option("--precision", o->precision,
                   "--validate: rounds go on until every interval's half-width is at most this "
                   "fraction of its median")
      ->capture_default_str();
  plan->add_option("--temperature", o->temperature, "--validate: sampling temperature")
      ->capture_default_str();
  plan->add_option("--workload", o->workload,
                   "--validate with a tokenizer target: a chat workload (default rewrite)");
  plan->callback([o, batch] {
    o->batch_given = batch->count() > 0;
    run_plan(*o);
  });
}

const CommandRegistrar kRegistrar{"plan", &setup_plan};

}  // namespace
}  // namespace speclab::cli
