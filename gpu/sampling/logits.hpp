// Logits to probabilities on the device, the temperature softmax of core::probs_from_logits for
// the unfiltered case (T > 0, top_k = 0, top_p = 1, min_p = 0; T = 0 gives the one-hot argmax,
// lowest id on ties), from fp32, fp16 or bf16 logits. The result is BITWISE core's: the same max,
// the same float exp (exp_nonpositive below, core/sampling/sampling.cpp's polynomial operation for
// operation), the same float scale, and the normaliser summed in core's fixed block order
// (core/base/rules.hpp: 2048-token blocks of 16 float lane sums, added in double in lane order,
// the block totals in block order). Algorithm and bytes read in gpu/README.md
// "gpu::probs_from_logits".
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>
#include <string_view>

#include "core/base/hd.hpp"

namespace speclab::gpu {

/// Storage of the logits.
enum class LogitsFormat {
  kFloat32,   ///< float
  kFloat16,   ///< IEEE binary16 bits (__half)
  kBFloat16,  ///< bfloat16 bits (__nv_bfloat16)
};

/// Per-row status bits (0 = ok). A bad row's probabilities are all 0, so a verifier fed with it
/// reports kChainBadSum for that request instead of sampling.
enum LogitsStatus : uint32_t {
  kLogitsOk = 0,
  kLogitsBadValue = 1u << 0,   ///< a NaN or +inf logit (-inf is a masked token)
  kLogitsAllMasked = 1u << 1,  ///< every logit is -inf
};

/// The float with these bits (std::bit_cast where nvcc may not have it in device code).
SPECLAB_HD inline float float_from_bits(uint32_t bits) {
#if defined(__CUDA_ARCH__)
  return __uint_as_float(bits);
#else
  float value;
  std::memcpy(&value, &bits, sizeof value);
  return value;
#endif
}

/// binary16 bits to float (exact: every half is a float). Software form, used on the host, in the
/// emulation, and as the reference; the device build converts with __half2float.
SPECLAB_HD inline float half_bits_to_float(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t exponent = (h >> 10) & 0x1fu;
  const uint32_t mantissa = h & 0x3ffu;
  if (exponent == 0) {  // zero or subnormal: mantissa · 2^-24, exact in float
    const float magnitude = static_cast<float>(mantissa) * 5.9604644775390625e-8f;
    return sign != 0 ? -magnitude : magnitude;
  }
  if (exponent == 31) return float_from_bits(sign | 0x7f800000u | (mantissa << 13));  // inf/NaN
  return float_from_bits(sign | ((exponent + 112u) << 23) | (mantissa << 13));
}

/// bfloat16 bits to float (exact: the upper half of a float).
SPECLAB_HD inline float bfloat16_bits_to_float(uint16_t b) {
  return float_from_bits(static_cast<uint32_t>(b) << 16);
}

/// The bits of a float (std::bit_cast where nvcc may not have it in device code).
SPECLAB_HD inline uint32_t bits_from_float(float value) {
#if defined(__CUDA_ARCH__)
  return __float_as_uint(value);
#else
  uint32_t bits;
  std::memcpy(&bits, &value, sizeof bits);
  return bits;
#endif
}

/// float to bfloat16 bits, rounded to nearest even (__float2bfloat16_rn's rounding); a NaN stays a
/// quiet NaN of the same sign. Software form, so the device and the emulation give the same bits.
SPECLAB_HD inline uint16_t bfloat16_bits_from_float(float value) {
  const uint32_t bits = bits_from_float(value);
  if ((bits & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((bits >> 16) | 0x0040u);
  return static_cast<uint16_t>((bits + 0x7fffu + ((bits >> 16) & 1u)) >> 16);
}

/// exp(x) for x ≤ 0 in float: core/sampling/sampling.cpp's exp_nonpositive (Cephes expf, Cody-Waite
/// reduction, degree-6 polynomial), the same float operations in the same order, so with no
/// contraction (-ffp-contract=off, --fmad=false) the result is bitwise core's. x < -87 (and -inf)
/// gives 0.
SPECLAB_HD inline float exp_nonpositive(float x) {
  const float clamped = x > -87.0f ? x : 0.0f - 87.0f;
  const float v = clamped * 1.44269504088896341f + 0.5f;
  int32_t k_int = static_cast<int32_t>(v);  // truncation, then floor for negative v
  k_int = k_int - (v < static_cast<float>(k_int) ? 1 : 0);
  const float k = static_cast<float>(k_int);
  const float r = clamped - k * 0.693359375f - k * -2.12194440e-4f;
  float poly = 0.0f + 1.9875691500e-4f;
  poly = poly * r + 1.3981999507e-3f;
  poly = poly * r + 8.3334519073e-3f;
  poly = poly * r + 4.1665795894e-2f;
  poly = poly * r + 1.6666665459e-1f;
  poly = poly * r + 5.0000001201e-1f;
  const float y = poly * r * r + r + 1.0f;
  const float scale = float_from_bits(static_cast<uint32_t>(k_int + 127) << 23);  // 2^k
  return x >= -87.0f ? y * scale : 0.0f;
}

/// Writes probs [rows, V] (fp32) from logits [rows, V] stored as `format` (rows·V elements of 4
/// bytes for kFloat32, 2 otherwise) with temperature T ≥ 0 (finite; 0 = greedy), and status
/// [rows] (LogitsStatus). All spans are device memory. Throws InvalidInput for bad shapes or T, as
/// core does; bad logit values are reported per row in `status`. Returns the launch status and
/// never synchronises. One CTA per row.
cudaError_t probs_from_logits(LogitsFormat format, std::span<const std::byte> logits, int64_t rows,
                              int64_t vocab, double temperature, std::span<float> probs,
                              std::span<uint32_t> status, cudaStream_t stream);

/// Bytes of one logit stored as `format`: 4 for kFloat32, 2 for the half formats.
inline int64_t logit_bytes(LogitsFormat format) { return format == LogitsFormat::kFloat32 ? 4 : 2; }

/// The one check of a logits span every launcher makes: `elements` logits of `format`, so
/// elements·logit_bytes(format) bytes, starting at a multiple of the element size (the kernels
/// load whole elements; a misaligned fp32 row faults on a device). Throws InvalidInput naming
/// `what` and `formula` (the element count's, e.g. "rows·V = 4096").
void check_logits_span(std::string_view what, LogitsFormat format,
                       std::span<const std::byte> logits, int64_t elements,
                       std::string_view formula);

/// One model's logits in device memory, as the sampling pipeline sees them before the softmax.
struct DeviceLogits {
  LogitsFormat format = LogitsFormat::kFloat32;
  std::span<const std::byte> data;  ///< rows·V elements of `format` (4 or 2 bytes each)
  double temperature = 1.0;         ///< T ≥ 0, finite; 0 = greedy (one-hot at the argmax)
};

}  // namespace speclab::gpu
