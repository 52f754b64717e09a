// LinearSoftmax timings (docs/architecture.md "core/models"): T(m) of the headline target for
// m = 1..16 positions beside the memory-bandwidth floor and T(m)/T(1), and the draft's T(1).
// "Gemm" is the skinny product G·z + b alone; "Score" is the whole score() call (hidden vectors,
// both products and the sampling pipeline over m rows of V).
#include <benchmark/benchmark.h>

#include <chrono>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "core/models/linear_softmax.hpp"
#include "core/probe/membw.hpp"

namespace {

using speclab::LinearSoftmaxModel;

LinearSoftmaxModel& headline(bool target) {
  static std::unique_ptr<LinearSoftmaxModel> t = speclab::make_linear_softmax_model("lsm-target");
  static std::unique_ptr<LinearSoftmaxModel> d = speclab::make_linear_softmax_model("lsm-draft");
  return target ? *t : *d;
}

double read_gbps() {
  static const double gbps = speclab::measure_read_bandwidth(int64_t{512} << 20, 3, 0).read_gbps;
  return gbps;
}

// T(1) of each benchmark family, for the T(m)/T(1) counter (m = 1 runs first).
std::map<std::string, double>& first_times() {
  static std::map<std::string, double> times;
  return times;
}

void report(benchmark::State& state, const std::string& key, double seconds, int64_t bytes) {
  const int64_t m = state.range(0);
  const double per_call = seconds / static_cast<double>(state.iterations());
  if (m == 1) first_times()[key] = per_call;
  state.counters["weight_GBps"] =
      benchmark::Counter(static_cast<double>(bytes), benchmark::Counter::kIsIterationInvariantRate);
  state.counters["floor_ms"] = 1e3 * static_cast<double>(bytes) / (read_gbps() * 1e9);
  if (auto it = first_times().find(key); it != first_times().end()) {
    state.counters["T_over_T1"] = per_call / it->second;
  }
}

// The skinny product G_r·z + b alone, with the model's shapes.
void gemm_bench(benchmark::State& state, bool target) {
  const auto& model = headline(target);
  const auto& family = model.family();
  const int64_t m = state.range(0), v = model.vocab(), r = model.rank();
  const speclab::PanelMatrix g =
      target ? speclab::PanelMatrix() : family.g().leading_block(v, r);  // draft's own copy
  const speclab::PanelMatrix& a = target ? family.g() : g;
  std::vector<float> z(m * r, 0.01f), out(m * v);
  read_gbps();
  double seconds = 0.0;
  for (auto _ : state) {
    const auto start = std::chrono::steady_clock::now();
    speclab::skinny_gemm(a, {.rows = v, .depth = r, .n_cols = m}, z, r, family.bias(), out, v);
    seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    benchmark::DoNotOptimize(out.data());
  }
  report(state, target ? "gemm_target" : "gemm_draft", seconds,
         static_cast<int64_t>(sizeof(float)) * v * r);
}

void score_bench(benchmark::State& state, bool target) {
  auto& model = headline(target);
  const int64_t m = state.range(0);
  std::vector<int32_t> tokens(32);
  for (size_t i = 0; i < tokens.size(); ++i) tokens[i] = static_cast<int32_t>(i * 977 % 32000);
  const speclab::ScoreRequest request{.tokens = tokens, .n_positions = m};
  std::vector<float> probs(m * model.vocab());
  read_gbps();
  model.reset_stats();
  for (auto _ : state) {
    model.score(std::span(&request, 1), {}, probs);
    benchmark::DoNotOptimize(probs.data());
  }
  report(state, target ? "score_target" : "score_draft", model.stats().seconds,
         model.weight_bytes());
}

void BM_LsmTargetGemm(benchmark::State& state) { gemm_bench(state, true); }
void BM_LsmDraftGemm(benchmark::State& state) { gemm_bench(state, false); }
void BM_LsmTargetScore(benchmark::State& state) { score_bench(state, true); }
void BM_LsmDraftScore(benchmark::State& state) { score_bench(state, false); }

BENCHMARK(BM_LsmTargetGemm)
    ->Arg(1)
    ->Arg(2)
    ->Arg(4)
    ->Arg(6)
    ->Arg(8)
    ->Arg(16)
    ->Arg(32)
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();
BENCHMARK(BM_LsmDraftGemm)->Arg(1)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_LsmTargetScore)
    ->Arg(1)
    ->Arg(2)
    ->Arg(4)
    ->Arg(5)
    ->Arg(6)
    ->Arg(8)
    ->Arg(16)
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();
BENCHMARK(BM_LsmDraftScore)->Arg(1)->Unit(benchmark::kMillisecond)->UseRealTime();

}  // namespace
