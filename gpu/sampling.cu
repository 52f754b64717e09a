// gpu::sample_rows (gpu/sampling.hpp): one CTA per row. The row is cut into chunks of 256 tokens
// (core::sample_categorical's blocks); warps stride over the chunks and each warp sums its
// chunk's fixed-point weights with shuffles into shared memory. Thread 0 then walks the chunk
// sums to the chunk holding fixed_target(bits, total) and scans that chunk's 256 weights. Integer
// sums are exact, so this is core's token for the same row and bits.
#include <limits>
#include <string>

#include "core/base/error.hpp"
#include "core/base/rules.hpp"
#include "gpu/sampling.hpp"
#include "gpu/simt.cuh"

namespace speclab::gpu {
namespace {

constexpr int kThreads = 256;
constexpr int kWarp = 32;
constexpr int64_t kChunk = 256;

__global__ void __launch_bounds__(kThreads) sample_rows_kernel(SampleRowsArgs a) {
  SPECLAB_DYNAMIC_SHARED(uint64_t, chunk_sums);
  const int64_t row = blockIdx.x;
  if (a.limit != nullptr && static_cast<int64_t>(a.position) > a.limit[row]) return;
  const float* probs = a.probs + row * (a.probs_stride != 0 ? a.probs_stride : a.vocab);
  const int64_t n_chunks = (a.vocab + kChunk - 1) / kChunk;
  const int warp = static_cast<int>(threadIdx.x) / kWarp;
  const int lane = static_cast<int>(threadIdx.x) % kWarp;
  float* copy = a.copy_to != nullptr ? a.copy_to + row * a.copy_stride : nullptr;
  for (int64_t chunk = warp; chunk < n_chunks; chunk += kThreads / kWarp) {
    uint64_t sum = 0;
    for (int64_t t = chunk * kChunk + lane; t < (chunk + 1) * kChunk && t < a.vocab; t += kWarp) {
      const float p = probs[t];
      sum += to_fixed(p);
      if (copy != nullptr) copy[t] = p;
    }
    for (int offset = kWarp / 2; offset > 0; offset >>= 1) {
      sum += __shfl_xor_sync(0xffffffffu, sum, offset);
    }
    if (lane == 0) chunk_sums[chunk] = sum;
  }
  __syncthreads();
  if (threadIdx.x != 0) return;
  uint64_t total = 0;
  for (int64_t c = 0; c < n_chunks; ++c) total += chunk_sums[c];
  int32_t token = 0;
  if (total == 0) {
    if (a.status != nullptr) a.status[row] |= kSampleZeroRow;
  } else {
    const uint32_t request =
        a.request_ids != nullptr ? a.request_ids[row] : static_cast<uint32_t>(row);
    const RandomAddress address{a.seed, request, a.step, a.position, a.purpose, 0};
    const uint64_t target = fixed_target(philox_bits(address), total);
    uint64_t cumulative = 0;
    int64_t chunk = 0;
    while (chunk + 1 < n_chunks && cumulative + chunk_sums[chunk] <= target) {
      cumulative += chunk_sums[chunk++];
    }
    token = static_cast<int32_t>(a.vocab - 1);
    for (int64_t t = chunk * kChunk; t < a.vocab; ++t) {
      cumulative += to_fixed(probs[t]);
      if (cumulative > target) {
        token = static_cast<int32_t>(t);
        break;
      }
    }
  }
  a.tokens[row * a.token_stride] = token;
  if (a.sequences != nullptr) {
    a.sequences[row * a.seq_stride + a.lengths[row] + a.seq_offset] = token;
  }
}

}  // namespace

cudaError_t sample_rows(const SampleRowsArgs& args, cudaStream_t stream) {
  if (args.rows < 1 || args.rows > std::numeric_limits<int32_t>::max()) {
    throw InvalidInput("sample_rows: rows is " + std::to_string(args.rows) +
                       "; expected 1 ≤ rows < 2^31 (one CTA per row)");
  }
  if (args.vocab < 1 || args.vocab > std::numeric_limits<int32_t>::max()) {
    throw InvalidInput("sample_rows: vocab size V is " + std::to_string(args.vocab) +
                       "; expected 1 ≤ V < 2^31");
  }
  if (args.probs == nullptr || args.tokens == nullptr) {
    throw InvalidInput("sample_rows: probs and tokens must be device pointers, not null");
  }
  if (args.sequences != nullptr && args.lengths == nullptr) {
    throw InvalidInput("sample_rows: sequences needs lengths");
  }
  const size_t shared = static_cast<size_t>((args.vocab + kChunk - 1) / kChunk) * sizeof(uint64_t);
  if (shared > 48 * 1024) {
    throw InvalidInput("sample_rows: vocab size V is " + std::to_string(args.vocab) +
                       "; expected V ≤ 1572864 (one 8-byte sum per 256 tokens in 48 KiB)");
  }
  return launch_kernel(sample_rows_kernel, dim3(static_cast<unsigned>(args.rows)), dim3(kThreads),
                       shared, stream, args);
}

}  // namespace speclab::gpu
