// gpu::synthetic_logits (gpu/models/synthetic_logits.hpp): a grid-stride loop, one hashed normal per
// entry (Box–Muller from two 24-bit uniforms of one splitmix64 hash).
#include <algorithm>
#include <cmath>
#include <string>

#include "core/base/error.hpp"
#include "gpu/base/simt.cuh"
#include "gpu/models/synthetic_logits.hpp"

namespace speclab::gpu {
namespace {

constexpr int kThreads = 256;

__device__ inline uint64_t splitmix(uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

__global__ void __launch_bounds__(kThreads) synthetic_kernel(SyntheticLogitsArgs a) {
  const int64_t total = a.rows * a.vocab;
  const int64_t stride = static_cast<int64_t>(gridDim.x) * kThreads;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * kThreads + threadIdx.x; i < total;
       i += stride) {
    const uint64_t bits = splitmix(a.seed ^ splitmix(static_cast<uint64_t>(i)));
    const float u1 = (static_cast<float>(bits >> 40) + 0.5f) * 5.9604644775390625e-8f;
    const float u2 = static_cast<float>((bits >> 8) & 0xffffffu) * 5.9604644775390625e-8f;
    const float z = sqrtf(-2.0f * logf(u1)) * cosf(6.2831853071795865f * u2);
    float value = a.scale * z;
    if (a.base != nullptr) {
      const int64_t row = i / a.vocab, t = i % a.vocab;
      const int64_t base_row = (row / a.group) * a.base_group_stride + row % a.group;
      value += a.base[base_row * a.vocab + t];
    }
    if (a.format == LogitsFormat::kBFloat16) {
      static_cast<uint16_t*>(a.out)[i] = bfloat16_bits_from_float(value);
    } else {
      static_cast<float*>(a.out)[i] = value;
    }
  }
}

}  // namespace

cudaError_t synthetic_logits(const SyntheticLogitsArgs& args, cudaStream_t stream) {
  if (args.rows < 1 || args.vocab < 1 || args.out == nullptr || args.group < 1 ||
      args.base_group_stride < args.group) {
    throw InvalidInput("synthetic_logits: rows " + std::to_string(args.rows) + ", vocab " +
                       std::to_string(args.vocab) + ", group " + std::to_string(args.group) +
                       ", base_group_stride " + std::to_string(args.base_group_stride) +
                       "; expected rows, vocab ≥ 1, a device output, 1 ≤ group ≤ stride");
  }
  if (args.format != LogitsFormat::kFloat32 && args.format != LogitsFormat::kBFloat16) {
    throw InvalidInput("synthetic_logits: format " + std::to_string(static_cast<int>(args.format)) +
                       "; expected kFloat32 or kBFloat16 (fp16 output is not implemented)");
  }
  const int64_t blocks =
      std::min<int64_t>((args.rows * args.vocab + kThreads - 1) / kThreads, int64_t{132} * 32);
  return launch_kernel(synthetic_kernel, dim3(static_cast<unsigned>(blocks)), dim3(kThreads), 0,
                       stream, args);
}

}  // namespace speclab::gpu
