// This host measured as the planner's hardware (see this_machine.hpp).
#include "core/probe/this_machine.hpp"

#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cmath>
#include <mutex>
#include <vector>

#include "core/models/linear_softmax.hpp"
#include "core/models/llama.hpp"
#include "core/models/ngram.hpp"
#include "core/models/prompt_lookup.hpp"
#include "core/models/skinny_gemm.hpp"
#include "core/probe/membw.hpp"
#include "core/sampling/sampling.hpp"

namespace speclab {

namespace {

double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

// Best-of-repeats FLOP rate of the skinny GEMM on a matrix that stays in the last-level cache,
// with enough columns (64) that it is bound by the FMA units, not by memory.
double measure_skinny_gemm_flops(int64_t rows, int64_t depth, int repeats) {
  PanelMatrix a(rows, depth);
  for (int64_t i = 0; i < rows; ++i) {
    for (int64_t k = 0; k < depth; ++k) a.at(i, k) = static_cast<float>((i * 7 + k * 3) % 17) / 17;
  }
  constexpr int64_t kCols = 64;
  std::vector<float> x(kCols * depth, 0.5f), out(kCols * rows);
  skinny_gemm(a, {.rows = rows, .depth = depth, .n_cols = kCols}, x, depth, {}, out, rows);
  double best = 0.0;
  for (int r = 0; r < repeats; ++r) {
    const auto start = std::chrono::steady_clock::now();
    skinny_gemm(a, {.rows = rows, .depth = depth, .n_cols = kCols}, x, depth, {}, out, rows);
    best = std::max(best, 2.0 * static_cast<double>(rows * depth * kCols) / seconds_since(start));
  }
  return best;
}

}  // namespace

HardwareSpec measure_this_machine(int threads) {
  HardwareSpec h{.name = std::string(kThisMachine), .overlapped = false, .measured = true};
  const BandwidthMeasurement bw = measure_read_bandwidth(int64_t{512} << 20, 5, threads);
  h.bandwidth_gbps = bw.read_gbps;
  // 4096 × 1024 fp32 (16 MiB) is the smallest matrix the skinny GEMM splits over all cores;
  // 2048 × 512 (4 MiB) it runs on one.
  h.fp32_tflops = (threads == 1 ? measure_skinny_gemm_flops(2048, 512, 7)
                                : measure_skinny_gemm_flops(4096, 1024, 7)) /
                  1e12;
  h.description =
      fmt::format("this machine ({} threads, measured: {:.1f} GB/s read, {:.0f} GFLOP/s fp32)",
                  bw.threads, h.bandwidth_gbps, h.fp32_tflops * 1e3);

  // The sampling pipeline over one 32000-logit row, one thread, as LanguageModel::score runs it.
  constexpr int64_t kVocab = 32000;
  std::vector<float> logits(kVocab), probs(kVocab);
  for (int64_t i = 0; i < kVocab; ++i) logits[i] = 4.0f * std::sin(0.37f * static_cast<float>(i));
  const SamplingParams sampling{.temperature = 1.0};
  double best = 1e30;
  for (int r = 0; r < 20; ++r) {
    const auto start = std::chrono::steady_clock::now();
    probs_from_logits(logits, sampling, probs);
    best = std::min(best, seconds_since(start));
  }
  h.seconds_per_logit = best / kVocab;

  // Fixed cost of a model call: the 16-token LinearSoftmax model, whose arithmetic is nil.
  auto tiny = make_linear_softmax_model("lsm-tiny-target");
  const std::vector<int32_t> tokens{1, 2, 3};
  const ScoreRequest request{tokens, 1, 0};
  best = 1e30;
  for (int r = 0; r < 50; ++r) {
    const auto start = std::chrono::steady_clock::now();
    tiny->score(std::span(&request, 1), sampling);
    best = std::min(best, seconds_since(start));
  }
  h.launch_overhead_seconds = best;

  const long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGE_SIZE);
  h.memory_gib = pages > 0 && page > 0
                     ? static_cast<double>(pages) * static_cast<double>(page) / 1073741824.0
                     : 0.0;
  return h;
}

HardwareSpec find_hardware(std::string_view name) {
  std::string key(name);
  std::transform(key.begin(), key.end(), key.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  if (key != kThisMachine) return find_gpu(name);
  static std::once_flag once;
  static HardwareSpec measured;
  std::call_once(once, [] { measured = measure_this_machine(); });
  return measured;
}

HardwareSpec this_machine_on_one_core() {
  static std::once_flag once;
  static HardwareSpec measured;
  std::call_once(once, [] { measured = measure_this_machine(1); });
  return measured;
}

namespace {

PassProfile linear_softmax_profile(const LinearSoftmaxModel& model) {
  const auto& c = model.family().config();
  const double v = static_cast<double>(c.vocab), d = static_cast<double>(c.hidden),
               r = static_cast<double>(model.rank());
  // Per scored token: z = H_r·h (r × d) then logits = G_r·z + b (V × r), 2 FLOPs per weight.
  return {.name = model.name(),
          .weight_bytes_read = static_cast<double>(model.weight_bytes()),
          .flops_per_token = 2.0 * (v * r + r * d),
          .kv_bytes_per_token = 0.0,
          .attention_flops_per_context_token = 0.0,
          .weight_bytes_stored = static_cast<double>(model.weight_bytes()),
          .vocab = c.vocab,
          .compute_dtype = WeightDtype::kFp32};
}

std::optional<PairCostModel> linear_softmax_pair(const LanguageModel& target,
                                                 const LanguageModel& draft) {
  const auto* t = dynamic_cast<const LinearSoftmaxModel*>(&target);
  const auto* d = dynamic_cast<const LinearSoftmaxModel*>(&draft);
  if (t == nullptr || d == nullptr) return std::nullopt;
  const HardwareSpec one_core = this_machine_on_one_core();
  const HardwareSpec all_cores = find_hardware(kThisMachine);
  auto rates_for = [&](const LinearSoftmaxModel& m) {
    const bool parallel = m.family().config().vocab * m.rank() >= kSkinnyGemmParallelElements;
    return roofline_rates(parallel ? all_cores : one_core, WeightDtype::kFp32);
  };
  return PairCostModel{.target = linear_softmax_profile(*t),
                       .draft = linear_softmax_profile(*d),
                       .target_rates = rates_for(*t),
                       .draft_rates = rates_for(*d),
                       .context = 0};
}

PassProfile llama_profile(const LlamaModel& model) {
  const LlamaConfig& c = model.config();
  const LlamaModel::PassWeights pass = model.pass_weights();
  int64_t attention_layers = 0;
  for (const bool skipped : model.skip().attention) attention_layers += skipped ? 0 : 1;
  const double kv_width = static_cast<double>(c.n_head_kv * c.head_dim);
  return {.name = model.name(),
          .weight_bytes_read = static_cast<double>(pass.bytes),
          .flops_per_token = 2.0 * static_cast<double>(pass.elements),
          // Keys and values in fp32, per attention layer.
          .kv_bytes_per_token = 2.0 * 4.0 * kv_width * static_cast<double>(attention_layers),
          // q·k and the weighted sum of v: two multiply-adds per head dimension and query head.
          .attention_flops_per_context_token =
              4.0 * static_cast<double>(c.n_head * c.head_dim * attention_layers),
          .weight_bytes_stored = static_cast<double>(model.weight_bytes()),
          .vocab = c.vocab,
          .compute_dtype = WeightDtype::kFp32};
}

// A model whose pass is a table lookup: no weights stream, only its call and its rows' sampling.
PassProfile table_profile(const LanguageModel& model) {
  return {.name = model.name(), .vocab = model.vocab(), .compute_dtype = WeightDtype::kFp32};
}

}  // namespace

std::optional<PairCostModel> pair_on_this_machine(const LanguageModel& target,
                                                  const LanguageModel& draft, int64_t context) {
  if (auto lsm = linear_softmax_pair(target, draft)) return lsm;
  const auto* t = dynamic_cast<const LlamaModel*>(&target);
  if (t == nullptr) return std::nullopt;
  const RooflineRates all_cores = roofline_rates(find_hardware(kThisMachine), WeightDtype::kFp32);
  PairCostModel model{.target = llama_profile(*t), .target_rates = all_cores, .context = context};
  if (const auto* llama = dynamic_cast<const LlamaModel*>(&draft)) {
    model.draft = llama_profile(*llama);
    model.draft_rates = all_cores;
  } else if (dynamic_cast<const NGramModel*>(&draft) != nullptr ||
             dynamic_cast<const PromptLookupModel*>(&draft) != nullptr) {
    // A lookup runs on the calling thread.
    model.draft = table_profile(draft);
    model.draft_rates = roofline_rates(this_machine_on_one_core(), WeightDtype::kFp32);
  } else {
    return std::nullopt;
  }
  return model;
}

}  // namespace speclab
