// `speclab plan --validate`: the cost model's predicted speedup (core/plan/cost_model.hpp, on the
// measured `this-machine` preset) against speculative decoding measured with the decode engine,
// for the LinearSoftmax pair lsm-target / lsm-draft by batch size.
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <optional>
#include <string>
#include <vector>

#include "bench/benches.hpp"
#include "core/base/philox.hpp"
#include "core/decode/decode.hpp"
#include "core/io/json.hpp"
#include "core/models/linear_softmax.hpp"
#include "core/plan/cost_model.hpp"
#include "core/plan/hardware.hpp"
#include "core/probe/machine.hpp"
#include "core/probe/this_machine.hpp"

namespace speclab::cli {
namespace {

constexpr int64_t kTokens = 48;  // generated per sequence, plain and speculative
constexpr int64_t kPromptLength = 16;
constexpr int kRepeats = 3;  // best of: the machine is shared
const std::vector<int64_t> kBatches = {1, 2, 4, 8, 16};
const std::vector<int64_t> kGammas = {1, 2, 4, 6};

std::vector<std::vector<int32_t>> random_prompts(int64_t batch, int64_t vocab) {
  std::vector<std::vector<int32_t>> prompts(batch, std::vector<int32_t>(kPromptLength));
  for (int64_t b = 0; b < batch; ++b) {
    for (int64_t i = 0; i < kPromptLength; ++i) {
      const RandomAddress a{
          7, static_cast<uint32_t>(b), 0, static_cast<uint32_t>(i), Purpose::kPlainSample, 1};
      prompts[b][i] = static_cast<int32_t>(philox_bits(a) % static_cast<uint32_t>(vocab));
    }
  }
  return prompts;
}

struct Cell {
  int64_t gamma = 0;
  double predicted = 0.0, measured = 0.0, alpha = 0.0;
};

struct BatchRow {
  int64_t batch = 0;
  double plain_seconds = 0.0;  // measured, whole run
  std::vector<Cell> cells;     // one per γ of kGammas
  Cell predicted_best() const {
    return *std::max_element(cells.begin(), cells.end(), [](const Cell& a, const Cell& b) {
      return a.predicted < b.predicted;
    });
  }
  Cell measured_best() const {
    return *std::max_element(cells.begin(), cells.end(),
                             [](const Cell& a, const Cell& b) { return a.measured < b.measured; });
  }
};

double measured_at(const BatchRow& row, int64_t gamma) {
  for (const Cell& c : row.cells) {
    if (c.gamma == gamma) return c.measured;
  }
  return 0.0;
}

double seconds_now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

std::optional<int64_t> first_not_paying(const std::vector<BatchRow>& rows, bool measured) {
  for (const BatchRow& r : rows) {
    const double best = measured ? r.measured_best().measured : r.predicted_best().predicted;
    if (best <= 1.0) return r.batch;
  }
  return std::nullopt;
}

}  // namespace

void run_plan_validate(bool json) {
  const double start = seconds_now();
  const HardwareSpec all_cores = find_hardware(kThisMachine);
  const HardwareSpec one_core = this_machine_on_one_core();
  auto target = make_linear_softmax_model("lsm-target");
  auto draft = make_linear_softmax_model("lsm-draft");
  const int64_t vocab = target->vocab();
  const PairCostModel model = *linear_softmax_pair_on_this_machine(*target, *draft);

  DecodeConfig config{.max_new_tokens = kTokens,
                      .sampling = {.temperature = 1.0},
                      .draft_sampling = {.temperature = 1.0},
                      .seed = 11};
  // Warm the lazily generated weights and the caches.
  {
    const auto prompts = random_prompts(2, vocab);
    DecodeConfig warm = config;
    warm.max_new_tokens = 4;
    plain_decode(*target, prompts, warm);
    speculative_decode(*target, *draft, prompts, warm);
  }
  // α from a short calibration run (docs/verifiers.md "Metrics every run records").
  double alpha = 0.0;
  {
    DecodeConfig calib = config;
    calib.gamma = 4;
    calib.seed = 12;
    const DecodeResult r = speculative_decode(*target, *draft, random_prompts(4, vocab), calib);
    alpha = r.metrics.acceptance_rate();
  }

  // Repeats are the outer loop, so the best of each configuration is taken from samples
  // spread over the whole run: other processes' bursts of load last seconds.
  std::vector<BatchRow> rows;
  std::vector<std::vector<double>> spec_seconds(kBatches.size(),
                                                std::vector<double>(kGammas.size(), 1e30));
  for (int64_t batch : kBatches) rows.push_back({.batch = batch, .plain_seconds = 1e30});
  for (int rep = 0; rep < kRepeats; ++rep) {
    for (size_t i = 0; i < kBatches.size(); ++i) {
      const auto prompts = random_prompts(kBatches[i], vocab);
      rows[i].plain_seconds = std::min(
          rows[i].plain_seconds, plain_decode(*target, prompts, config).metrics.decode_seconds);
      for (size_t j = 0; j < kGammas.size(); ++j) {
        DecodeConfig c = config;
        c.gamma = kGammas[j];
        const DecodeResult r = speculative_decode(*target, *draft, prompts, c);
        spec_seconds[i][j] = std::min(spec_seconds[i][j], r.metrics.decode_seconds);
        if (rep == 0) {
          rows[i].cells.push_back({.gamma = kGammas[j], .alpha = r.metrics.acceptance_rate()});
        }
      }
    }
  }
  for (size_t i = 0; i < kBatches.size(); ++i) {
    for (size_t j = 0; j < kGammas.size(); ++j) {
      Cell& cell = rows[i].cells[j];
      cell.measured = rows[i].plain_seconds / spec_seconds[i][j];  // same tokens generated
      cell.predicted = step_cost(model, alpha, kBatches[i], kGammas[j]).speedup;
    }
  }
  const auto predicted_even = first_not_paying(rows, false);
  const auto measured_even = first_not_paying(rows, true);
  const double elapsed = seconds_now() - start;
  const double error_b1 = rows.front().predicted_best().predicted /
                              measured_at(rows.front(), rows.front().predicted_best().gamma) -
                          1.0;

  if (json) {
    Json machine = {{"read_gbps", all_cores.bandwidth_gbps},
                    {"read_gbps_one_core", one_core.bandwidth_gbps},
                    {"gflops", all_cores.fp32_tflops * 1e3},
                    {"gflops_one_core", one_core.fp32_tflops * 1e3},
                    {"ns_per_logit", all_cores.seconds_per_logit * 1e9},
                    {"call_overhead_us", all_cores.launch_overhead_seconds * 1e6}};
    machine.update(machine_json(machine_identity()));
    Json list = Json::array();
    for (const BatchRow& r : rows) {
      const Cell p = r.predicted_best(), m = r.measured_best();
      Json grid = Json::array();
      for (const Cell& c : r.cells) {
        grid.push_back({{"gamma", c.gamma},
                        {"predicted", c.predicted},
                        {"measured", c.measured},
                        {"alpha", c.alpha}});
      }
      list.push_back({{"batch", r.batch},
                      {"gamma", p.gamma},
                      {"predicted", p.predicted},
                      {"measured", measured_at(r, p.gamma)},
                      {"measured_best_gamma", m.gamma},
                      {"measured_best", m.measured},
                      {"by_gamma", grid}});
    }
    const Json out = {{"machine", machine},
                      {"target", target->name()},
                      {"draft", draft->name()},
                      {"tokens", kTokens},
                      {"alpha", alpha},
                      {"rows", list},
                      {"predicted_break_even_batch", json_or_null(predicted_even)},
                      {"measured_break_even_batch", json_or_null(measured_even)},
                      {"batch1_relative_error", error_b1},
                      {"seconds", elapsed}};
    std::printf("%s\n", json_text(out).c_str());
    return;
  }
  std::printf(
      "speclab plan --validate: %s + %s on this machine, %lld tokens per sequence, α = %.3f "
      "(calibration run)\n",
      target->name().c_str(), draft->name().c_str(), static_cast<long long>(kTokens), alpha);
  std::printf("  machine: %s\n", machine_line(machine_identity()).c_str());
  std::printf(
      "  this-machine: %.1f GB/s read (%.1f one core), %.0f GFLOP/s fp32 (%.0f one core), "
      "%.2f ns per logit sampled, %.1f µs per call\n",
      all_cores.bandwidth_gbps, one_core.bandwidth_gbps, all_cores.fp32_tflops * 1e3,
      one_core.fp32_tflops * 1e3, all_cores.seconds_per_logit * 1e9,
      all_cores.launch_overhead_seconds * 1e6);
  std::printf("\n  batch  γ*  predicted  measured  error   | measured best: γ  speedup\n");
  for (const BatchRow& r : rows) {
    const Cell p = r.predicted_best(), m = r.measured_best();
    const double measured_at_p = measured_at(r, p.gamma);
    std::printf("  %5lld  %2lld  %8.2fx  %7.2fx  %+5.0f%%  |               %lld  %6.2fx\n",
                static_cast<long long>(r.batch), static_cast<long long>(p.gamma), p.predicted,
                measured_at_p, 100.0 * (p.predicted / measured_at_p - 1.0),
                static_cast<long long>(m.gamma), m.measured);
  }
  auto show = [](std::optional<int64_t> v) {
    return v ? fmt::format("{}", *v) : std::string("none up to 16");
  };
  std::printf(
      "\n  break-even batch (smallest batch whose best speedup ≤ 1): predicted %s, measured %s\n",
      show(predicted_even).c_str(), show(measured_even).c_str());
  std::printf("  γ* is the model's best γ of {1, 2, 4, 6}; error = predicted / measured − 1.\n");
  std::printf("  %.1f s\n", elapsed);
}

}  // namespace speclab::cli
