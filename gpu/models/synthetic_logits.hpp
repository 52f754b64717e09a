// Synthetic logits generated on the device, for benchmarks that need gigabytes of distinct
// inputs (so that the L2 cache cannot serve them) without a host round trip: a target row is
// scale·z and a draft row is its target row plus noise·z', z and z' standard normals hashed from
// (seed, row, token). The draft's noise sets the acceptance rate, as core::make_synthetic_batch's
// draft_noise does on the host. The rows are written as fp32 or as bf16 (the fp32 values rounded
// to nearest even), so the fused-logits verifiers can be timed on both formats of the same logits.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "gpu/sampling/logits.hpp"

namespace speclab::gpu {

struct SyntheticLogitsArgs {
  uint64_t seed = 0;
  int64_t rows = 0;
  int64_t vocab = 0;
  float scale = 1.0f;  ///< std of the random part
  /// Optional base rows: out row r adds base row (r / group)·base_group_stride + r % group, so a
  /// draft [B, γ, V] can sit on a target [B, γ+1, V] (group γ, stride γ+1).
  const float* base = nullptr;
  int64_t group = 1;
  int64_t base_group_stride = 1;
  /// [rows, V] elements of `format`: float, or bfloat16 bits (uint16_t). Base rows are always fp32.
  void* out = nullptr;
  LogitsFormat format = LogitsFormat::kFloat32;  ///< kFloat32 or kBFloat16 (kFloat16: InvalidInput)
};

/// Fills out (device memory) on `stream`; throws InvalidInput for bad shapes, returns the launch
/// status and never synchronises.
cudaError_t synthetic_logits(const SyntheticLogitsArgs& args, cudaStream_t stream);

}  // namespace speclab::gpu
