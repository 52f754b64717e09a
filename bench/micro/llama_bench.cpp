// LlamaModel (core/models/llama.hpp) on the real SmolLM2-135M, fp32 against quantised weight
// storage: T(m) of scoring m = 1..8 new positions after a 32-token context (the KV cache keeps the
// context; each call recomputes the m positions and their LM-head rows), the weight bytes streamed
// per second (T(m)/T(1) from the times of one run). Skipped when `speclab fetch-model smollm2-135m`
// has not been run.
#include <benchmark/benchmark.h>

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "core/base/error.hpp"
#include "core/models/llama.hpp"
#include "core/models/model_registry.hpp"

namespace {

using speclab::LlamaModel;

LlamaModel* model(const std::string& name) {
  static std::map<std::string, std::unique_ptr<speclab::LanguageModel>> models;
  auto& m = models[name];
  if (!m) {
    try {
      m = speclab::make_model(name);
    } catch (const speclab::Error&) {
      return nullptr;
    }
  }
  return dynamic_cast<LlamaModel*>(m.get());
}

void step_bench(benchmark::State& state, const std::string& name) {
  LlamaModel* lm = model(name);
  if (lm == nullptr) {
    state.SkipWithError(
        "data/models/SmolLM2-135M-Instruct.Q4_1.gguf is absent; run `speclab "
        "fetch-model smollm2-135m`");
    return;
  }
  const int64_t m = state.range(0);
  std::vector<int32_t> tokens(32 + m);
  for (size_t i = 0; i < tokens.size(); ++i)
    tokens[i] = static_cast<int32_t>(1000 + i * 977 % 40000);
  const speclab::ScoreRequest request{tokens, m, 1};
  lm->release(1);
  (void)lm->logits({&request, 1});  // caches the context
  for (auto _ : state) {
    benchmark::DoNotOptimize(lm->logits({&request, 1}).data());
  }
  lm->release(1);
  state.counters["weight_GBps"] = benchmark::Counter(static_cast<double>(lm->weight_bytes()),
                                                     benchmark::Counter::kIsIterationInvariantRate);
}

void BM_LlamaStep_Fp32(benchmark::State& state) { step_bench(state, "smollm2-135m-f32"); }
void BM_LlamaStep_Quantised(benchmark::State& state) { step_bench(state, "smollm2-135m"); }

BENCHMARK(BM_LlamaStep_Fp32)->DenseRange(1, 8)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_LlamaStep_Quantised)->DenseRange(1, 8)->Unit(benchmark::kMillisecond)->UseRealTime();

}  // namespace
