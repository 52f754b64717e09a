// Google Benchmark micro-benchmarks of the chain verifier (V1) and of this machine's read
// bandwidth, so the two can be compared in one run; `speclab bench verify` prints the floor.
#include <benchmark/benchmark.h>

#include "core/probe/membw.hpp"
#include "core/verify/synthetic_batch.hpp"
#include "core/verify/verify_chain.hpp"

namespace {

speclab::ChainBatchData& batch_b8_g5_v32000() {
  static speclab::ChainBatchData data =
      speclab::make_synthetic_batch({.batch = 8, .gamma = 5, .vocab = 32000, .seed = 1});
  return data;
}

void BM_VerifyChainFast(benchmark::State& state) {
  const auto& data = batch_b8_g5_v32000();
  uint32_t step = 0;
  for (auto _ : state) {
    auto result = speclab::verify_chain(data.view(), {.seed = 7, .step = step++});
    benchmark::DoNotOptimize(result.emitted_tokens.data());
  }
  state.counters["verified_tokens"] =
      benchmark::Counter(8.0 * 6.0, benchmark::Counter::kIsIterationInvariantRate);
}
BENCHMARK(BM_VerifyChainFast)->Unit(benchmark::kMicrosecond);

void BM_VerifyChainReference(benchmark::State& state) {
  const auto& data = batch_b8_g5_v32000();
  uint32_t step = 0;
  for (auto _ : state) {
    auto result = speclab::verify_chain_reference(data.view(), {.seed = 7, .step = step++});
    benchmark::DoNotOptimize(result.emitted_tokens.data());
  }
}
BENCHMARK(BM_VerifyChainReference)->Unit(benchmark::kMicrosecond);

void BM_ReadBandwidth(benchmark::State& state) {
  double gbps = 0.0;
  for (auto _ : state) {
    gbps = speclab::measure_read_bandwidth(int64_t{256} << 20, 1, static_cast<int>(state.range(0)))
               .read_gbps;
  }
  state.counters["read_GBps"] = gbps;
}
BENCHMARK(BM_ReadBandwidth)->Arg(1)->Arg(0)->Unit(benchmark::kMillisecond)->Iterations(3);

}  // namespace
