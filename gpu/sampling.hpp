// Categorical sampling of probability rows on the device: the inverse-CDF rule of
// core::sample_categorical (core/sampling/sampling.hpp) in the exact 2^-58 fixed point of
// core/base/rules.hpp, so for the same row and the same 32 Philox bits the device picks core's
// token bit for bit. Used for the draft tokens of the GPU decoding loop (docs/verifiers.md V1 step
// 1: x_i ~ q_i).
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>
#include <span>

#include "core/base/philox.hpp"

namespace speclab::gpu {

/// Status bit of a sampled row whose fixed-point weights sum to zero (no token can be drawn).
inline constexpr uint32_t kSampleZeroRow = 1u << 5;

/// One draft position of a batch of rows, all device memory.
struct SampleRowsArgs {
  const float* probs = nullptr;  ///< row b at probs[b·probs_stride, +V): what is sampled from
  int64_t probs_stride = 0;      ///< 0 means V (contiguous rows)
  int64_t rows = 0;              ///< B
  int64_t vocab = 0;             ///< V
  uint64_t seed = 0;             ///< Philox address (seed; request = row, step, position,
  uint32_t step = 0;             ///<   purpose); `request_ids` may rename the rows
  uint32_t position = 0;         ///< 1-based position i (core's draft uses i)
  Purpose purpose = Purpose::kDraftSample;
  const uint32_t* request_ids = nullptr;  ///< [rows] or null for 0..rows-1
  /// Row b is sampled only when position ≤ limit[b] (null: every row). Rows not sampled write
  /// nothing.
  const int32_t* limit = nullptr;
  int32_t* tokens = nullptr;  ///< token of row b at tokens[b·token_stride]
  int64_t token_stride = 1;
  int32_t* sequences = nullptr;  ///< optional: also appended to sequences[b·seq_stride +
  int64_t seq_stride = 0;        ///<   lengths[b] + seq_offset]
  const int32_t* lengths = nullptr;
  int64_t seq_offset = 0;
  float* copy_to = nullptr;  ///< optional: row b copied to copy_to[b·copy_stride, +V)
  int64_t copy_stride = 0;
  uint32_t* status = nullptr;  ///< optional [rows]: kSampleZeroRow ORed in (token 0)
};

/// Samples every selected row on `stream` (one CTA per row). Throws InvalidInput for bad shapes;
/// returns the launch status and never synchronises.
cudaError_t sample_rows(const SampleRowsArgs& args, cudaStream_t stream);

}  // namespace speclab::gpu
