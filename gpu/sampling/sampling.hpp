// Categorical sampling of probability rows on the device: the inverse-CDF rule of
// core::sample_categorical (core/sampling/sampling.hpp) in the exact 2^-58 fixed point of
// core/base/rules.hpp, so for the same row and the same 32 Philox bits the device picks core's
// token bit for bit. Used for the draft tokens of the GPU decoding loop (docs/verifiers.md V1 step
// 1: x_i ~ q_i). sample_logits_rows does the same from logits rows with the temperature softmax
// fused (core::probs_from_logits's row, computed where it is summed, never written).
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>
#include <span>

#include "core/base/philox.hpp"
#include "gpu/base/device_types.hpp"
#include "gpu/sampling/logits.hpp"

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
  /// Optional (device memory): seed and step are read from it at run time instead of `seed` and
  /// `step` (a launch captured in a CUDA graph samples the step the word holds at replay).
  const DeviceSeedStep* seed_step = nullptr;
  uint32_t position = 0;  ///< 1-based position i (core's draft uses i)
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

/// Rows given as logits: row b is logits.data's row b ([rows, V] contiguous, in logits.format),
/// tempered at logits.temperature (T ≥ 0, 0 = one-hot at the argmax).
struct SampleLogitsArgs {
  DeviceLogits logits;
  /// Everything else as sample_rows (shape, address, limit, outputs); `probs`, `probs_stride` and
  /// `copy_to` must stay unset (no probability row exists).
  SampleRowsArgs sample;
  void* copy_logits_to = nullptr;  ///< optional: row b's logits copied, in logits.format, to
  int64_t copy_logits_stride = 0;  ///<   element b·copy_logits_stride
  /// Optional: row b's probabilities q, as sampled (probs_from_logits's row bit for bit, zeros for
  /// a bad row), written to probs_to[b·probs_stride, +V), for a consumer that reads q itself.
  float* probs_to = nullptr;
  int64_t probs_stride = 0;
};

/// sample_rows on core::probs_from_logits's rows without writing them: per row (one CTA) the
/// fused softmax's statistics (gpu/sampling/fused_logits.cuh: max, argmax, core's block-ordered
/// normaliser), then the chain verifier's fixed-point weight pass and inverse-CDF locate over
/// p(t) computed from each logit. The token is bit for bit that of probs_from_logits followed by
/// sample_rows; a row with a NaN or +inf logit or every logit -inf (probs_from_logits: a zero row)
/// gives token 0 and kSampleZeroRow. Throws InvalidInput for bad shapes or T; never synchronises.
cudaError_t sample_logits_rows(const SampleLogitsArgs& args, cudaStream_t stream);

}  // namespace speclab::gpu
