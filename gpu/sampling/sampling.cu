// gpu::sample_rows (gpu/sampling/sampling.hpp): one CTA per row. The row is cut into chunks of 256
// tokens (core::sample_categorical's blocks); warps stride over the chunks and each warp sums its
// chunk's fixed-point weights with shuffles into shared memory. Thread 0 then walks the chunk
// sums to the chunk holding fixed_target(bits, total) and scans that chunk's 256 weights. Integer
// sums are exact, so this is core's token for the same row and bits. gpu::sample_logits_rows: one
// CTA per logits row, compute_row_stats (gpu/sampling/fused_logits.cuh) and then the chain
// verifier's weight_pass and locate over the row's p(t) (the row sampler of
// gpu/sampling/row_sampler.cuh).
#include <cmath>
#include <limits>
#include <string>

#include "core/base/error.hpp"
#include "core/base/rules.hpp"
#include "gpu/base/reduce.cuh"
#include "gpu/base/simt.cuh"
#include "gpu/sampling/fused_logits.cuh"
#include "gpu/sampling/row_sampler.cuh"
#include "gpu/sampling/sampling.hpp"

namespace speclab::gpu {
namespace {

constexpr int kThreads = 256;
constexpr int kWarp = detail::kWarpSize;
constexpr int64_t kChunk = kChunkTokens;

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
    sum = detail::warp_sum<KernelMutant::kNone>(sum);
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
    uint64_t seed = 0;
    uint32_t step = 0;
    detail::launch_seed_step(a, &seed, &step);
    const RandomAddress address{seed, request, step, a.position, a.purpose, 0};
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

struct SampleLogitsKernelArgs {
  detail::LogitsSource source;  // [rows, V]
  SampleRowsArgs sample;        // probs, probs_stride and copy_to unset
  void* copy_logits_to;
  int64_t copy_logits_stride;
  float* probs_to;
  int64_t probs_stride;
  int64_t n_chunks;  // ⌈V / kChunkTokens⌉
};

/// Dynamic shared memory of sample_logits_kernel: BlockScratch, RowStatsScratch, the chunk sums.
size_t sample_logits_shared_bytes(int64_t n_chunks) {
  return sizeof(detail::BlockScratch) + sizeof(detail::RowStatsScratch) +
         static_cast<size_t>(n_chunks) * sizeof(uint64_t);
}

__global__ void __launch_bounds__(1024) sample_logits_kernel(SampleLogitsKernelArgs k) {
  SPECLAB_STATIC_SHARED(detail::LocateState, state);
  SPECLAB_DYNAMIC_SHARED(uint64_t, shared);
  detail::BlockScratch* scratch = reinterpret_cast<detail::BlockScratch*>(shared);
  detail::RowStatsScratch* stats_scratch = reinterpret_cast<detail::RowStatsScratch*>(scratch + 1);
  uint64_t* chunk_sums = reinterpret_cast<uint64_t*>(stats_scratch + 1);
  const SampleRowsArgs& a = k.sample;
  const int64_t row = blockIdx.x, v = a.vocab;
  if (a.limit != nullptr && static_cast<int64_t>(a.position) > a.limit[row]) return;  // uniform
  if (threadIdx.x == 0) {
    state.chunk = -1;
    state.chunk_base = 0;
    state.status = kChainOk;
    state.last = 0;
  }
  const void* rows[1] = {detail::logits_row(k.source, row, v)};
  detail::compute_row_stats(&k.source, rows, 1, v, true, stats_scratch);  // barriers: state seen
  const detail::LogitsRowStats stats = stats_scratch->result[0];
  if (k.copy_logits_to != nullptr) {
    const bool wide = k.source.format == static_cast<int>(LogitsFormat::kFloat32);
    for (int64_t t = threadIdx.x; t < v; t += blockDim.x) {
      const int64_t to = row * k.copy_logits_stride + t;
      if (wide) {
        static_cast<float*>(k.copy_logits_to)[to] = static_cast<const float*>(rows[0])[t];
      } else {
        static_cast<uint16_t*>(k.copy_logits_to)[to] = static_cast<const uint16_t*>(rows[0])[t];
      }
    }
  }
  const detail::LogitsProbRow p = detail::prob_row(k.source, rows[0], stats);
  if (k.probs_to != nullptr) {
    float* out = k.probs_to + row * k.probs_stride;
    for (int64_t t = threadIdx.x; t < v; t += blockDim.x) {
      out[t] = stats.status == kChainOk ? p(t) : 0.0f;
    }
  }
  uint64_t total = 0;
  if (stats.status == kChainOk) {  // block-uniform
    uint64_t seed = 0;
    uint32_t step = 0;
    detail::launch_seed_step(a, &seed, &step);
    const uint32_t request =
        a.request_ids != nullptr ? a.request_ids[row] : static_cast<uint32_t>(row);
    const uint32_t bits = philox_bits({seed, request, step, a.position, a.purpose, 0});
    // The sum checks of the pass are the verifiers'; sample_rows checks nothing but the total.
    detail::weight_pass<false, KernelMutant::kNone>(p, p, 1.0f, v, k.n_chunks, chunk_sums, scratch);
    total = detail::locate<false, KernelMutant::kNone>(p, p, 1.0f, v, k.n_chunks, chunk_sums, bits,
                                                       scratch, &state);
  }
  if (threadIdx.x != 0) return;
  int32_t token = 0;
  if (total == 0) {
    if (a.status != nullptr) a.status[row] |= kSampleZeroRow;
  } else {
    token = state.status == kChainOk ? state.last : static_cast<int32_t>(v - 1);
  }
  a.tokens[row * a.token_stride] = token;
  if (a.sequences != nullptr) {
    a.sequences[row * a.seq_stride + a.lengths[row] + a.seq_offset] = token;
  }
}

// The checks sample_rows and sample_logits_rows share.
void check_sample_args(const SampleRowsArgs& args, const char* name) {
  if (args.rows < 1 || args.rows > std::numeric_limits<int32_t>::max()) {
    throw InvalidInput(std::string(name) + ": rows is " + std::to_string(args.rows) +
                       "; expected 1 ≤ rows < 2^31 (one CTA per row)");
  }
  if (args.vocab < 1 || args.vocab > std::numeric_limits<int32_t>::max()) {
    throw InvalidInput(std::string(name) + ": vocab size V is " + std::to_string(args.vocab) +
                       "; expected 1 ≤ V < 2^31");
  }
  if (args.tokens == nullptr) {
    throw InvalidInput(std::string(name) + ": tokens must be a device pointer, not null");
  }
  if (args.sequences != nullptr && args.lengths == nullptr) {
    throw InvalidInput(std::string(name) + ": sequences needs lengths");
  }
}

}  // namespace

cudaError_t sample_logits_rows(const SampleLogitsArgs& args, cudaStream_t stream) {
  const SampleRowsArgs& s = args.sample;
  check_sample_args(s, "sample_logits_rows");
  if (s.probs != nullptr || s.probs_stride != 0 || s.copy_to != nullptr) {
    throw InvalidInput(
        "sample_logits_rows: probs, probs_stride and copy_to are set; rows given as logits have "
        "no probability row (copy_logits_to copies the logits)");
  }
  const double t = args.logits.temperature;
  if (!std::isfinite(t) || t < 0.0) {
    throw InvalidInput("sample_logits_rows: temperature is " + std::to_string(t) +
                       "; expected a finite value ≥ 0");
  }
  if (args.logits.data.data() == nullptr) {
    throw InvalidInput("sample_logits_rows: logits must be a device pointer, not null");
  }
  check_logits_span("sample_logits_rows: logits", args.logits.format, args.logits.data,
                    s.rows * s.vocab, "rows·V = " + std::to_string(s.rows * s.vocab));
  SampleLogitsKernelArgs k{};
  k.source = detail::logits_source(args.logits);
  k.sample = s;
  k.copy_logits_to = args.copy_logits_to;
  k.copy_logits_stride = args.copy_logits_stride;
  k.probs_to = args.probs_to;
  k.probs_stride = args.probs_stride;
  k.n_chunks = (s.vocab + kChunkTokens - 1) / kChunkTokens;
  const size_t shared = sample_logits_shared_bytes(k.n_chunks);
  if (shared > 48 * 1024) {
    throw InvalidInput(
        "sample_logits_rows: vocab size V is " + std::to_string(s.vocab) + "; expected V ≤ " +
        std::to_string((48 * 1024 - sample_logits_shared_bytes(0)) / 8 * kChunkTokens) +
        " (one 8-byte sum per 256 tokens in 48 KiB of shared memory)");
  }
  return launch_kernel(sample_logits_kernel, dim3(static_cast<unsigned>(s.rows)),
                       dim3(static_cast<unsigned>(detail::row_block_threads(s.vocab))), shared,
                       stream, k);
}

cudaError_t sample_rows(const SampleRowsArgs& args, cudaStream_t stream) {
  check_sample_args(args, "sample_rows");
  if (args.probs == nullptr) {
    throw InvalidInput("sample_rows: probs must be a device pointer, not null");
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
