// quant_gemm against skinny_gemm on SmolLM2-135M's matrix shapes (core/models/quant_matrix.hpp):
// T(m) for m = 1..9 (a verification pass of γ ≤ 8) and 16 positions and the weight bytes streamed
// per second (T(m)/T(1) from the times of one run), with the weights stored as Q4_1 / Q8_0 blocks
// or as the dequantised fp32 PanelMatrix. Random weights: the timing does not depend on the values.
#include <benchmark/benchmark.h>

#include <cstring>
#include <map>
#include <string>
#include <vector>

#include "core/io/gguf.hpp"
#include "core/models/quant_matrix.hpp"
#include "core/models/skinny_gemm.hpp"

namespace {

using speclab::GgmlType;

struct Matrices {
  speclab::QuantMatrix quant;
  speclab::PanelMatrix fp32;
};

// rows × depth random blocks of `type` (scales near 0.01, as a trained layer's), both storages.
const Matrices& matrices(GgmlType type, int64_t rows, int64_t depth) {
  static std::map<std::string, Matrices> cache;
  const std::string key =
      speclab::ggml_type_name(type) + std::to_string(rows) + "x" + std::to_string(depth);
  if (auto it = cache.find(key); it != cache.end()) return it->second;
  const int64_t size = speclab::ggml_type_traits(type).block_bytes, n_blocks = rows * depth / 32;
  std::vector<std::byte> blocks(static_cast<size_t>(n_blocks * size));
  uint64_t s = 7;
  for (auto& b : blocks) {
    s = s * 6364136223846793005ULL + 1442695040888963407ULL;
    b = static_cast<std::byte>(s >> 56);
  }
  const uint16_t scale = 0x211f;  // fp16 ≈ 0.01
  for (int64_t b = 0; b < n_blocks; ++b) {
    std::memcpy(blocks.data() + b * size, &scale, 2);
    if (type == GgmlType::kQ4_1) std::memcpy(blocks.data() + b * size + 2, &scale, 2);
  }
  Matrices m{speclab::QuantMatrix(type, blocks, rows, depth), speclab::PanelMatrix(rows, depth)};
  std::vector<float> row(static_cast<size_t>(depth));
  for (int64_t i = 0; i < rows; ++i) {
    m.quant.dequantize_row(i, row);
    for (int64_t k = 0; k < depth; ++k) m.fp32.at(i, k) = row[static_cast<size_t>(k)];
  }
  return cache.emplace(key, std::move(m)).first->second;
}

void gemm_bench(benchmark::State& state, GgmlType type, int64_t rows, int64_t depth, bool quant) {
  const Matrices& mats = matrices(type, rows, depth);
  const int64_t m = state.range(0);
  std::vector<float> x(static_cast<size_t>(m * depth), 0.01f), out(static_cast<size_t>(m * rows));
  for (auto _ : state) {
    if (quant) {
      speclab::quant_gemm(mats.quant, x, m, depth, out, rows);
    } else {
      speclab::skinny_gemm(mats.fp32, {.rows = rows, .depth = depth, .n_cols = m}, x, depth, {},
                           out, rows);
    }
    benchmark::DoNotOptimize(out.data());
    benchmark::ClobberMemory();
  }
  const int64_t bytes = quant ? mats.quant.bytes() : mats.fp32.bytes();
  state.counters["weight_GBps"] =
      benchmark::Counter(static_cast<double>(bytes), benchmark::Counter::kIsIterationInvariantRate);
}

// Attention/FFN shapes of one SmolLM2 layer (Q4_1) and the tied LM head (Q8_0).
void BM_Fp32_FfnUp(benchmark::State& s) { gemm_bench(s, GgmlType::kQ4_1, 1536, 576, false); }
void BM_Quant_FfnUp(benchmark::State& s) { gemm_bench(s, GgmlType::kQ4_1, 1536, 576, true); }
void BM_Fp32_FfnDown(benchmark::State& s) { gemm_bench(s, GgmlType::kQ4_1, 576, 1536, false); }
void BM_Quant_FfnDown(benchmark::State& s) { gemm_bench(s, GgmlType::kQ4_1, 576, 1536, true); }
void BM_Fp32_AttnK(benchmark::State& s) { gemm_bench(s, GgmlType::kQ4_1, 192, 576, false); }
void BM_Quant_AttnK(benchmark::State& s) { gemm_bench(s, GgmlType::kQ4_1, 192, 576, true); }
void BM_Fp32_Head(benchmark::State& s) { gemm_bench(s, GgmlType::kQ8_0, 49152, 576, false); }
void BM_Quant_Head(benchmark::State& s) { gemm_bench(s, GgmlType::kQ8_0, 49152, 576, true); }

#define SPECLAB_M_SWEEP(f) \
  BENCHMARK(f)->DenseRange(1, 9)->Arg(16)->Unit(benchmark::kMicrosecond)->UseRealTime()
SPECLAB_M_SWEEP(BM_Fp32_FfnUp);
SPECLAB_M_SWEEP(BM_Quant_FfnUp);
SPECLAB_M_SWEEP(BM_Fp32_FfnDown);
SPECLAB_M_SWEEP(BM_Quant_FfnDown);
SPECLAB_M_SWEEP(BM_Fp32_AttnK);
SPECLAB_M_SWEEP(BM_Quant_AttnK);
SPECLAB_M_SWEEP(BM_Fp32_Head);
SPECLAB_M_SWEEP(BM_Quant_Head);

}  // namespace
