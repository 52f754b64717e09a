// Scalar rules and constants shared by the CPU reference, the fast CPU path and the CUDA kernels
// (docs/verifiers.md V1-V5): the accept tests, residual weights, inverse-CDF sampling in 2^-58
// fixed point, the row-sum tolerance, the chunk size of blocked scans and the tree-node limit.
// Integer prefix sums are exact and associative, so any reduction order (serial, blocked, a GPU
// tree) yields the same token for the same uniform. Every rule both builds must agree on is written
// here, once.
#pragma once

#include <bit>
#include <cstdint>

#include "core/base/hd.hpp"
#ifdef SPECLAB_MUTANTS  // host-only mutant libraries (core/base/mutants.hpp); never the device
#include "core/base/mutants.hpp"
#endif

namespace speclab {

/// Fixed-point scale of sampling weights: w -> floor(w * 2^58). Weights are probabilities
/// (≤ 1 + 1e-4 per row), so a row's total stays far below 2^64; resolution is 3.5e-18.
/// Scaling a float by a power of two is exact, so the conversion is exact truncation.
inline constexpr float kFixedScale = 288230376151711744.0f;  // 2^58

/// Tolerance on a probability row's sum (float32 input): every implementation accepts a row whose
/// sum is within 1 ± kProbSumTolerance, and a gathered value up to 1 + kProbSumTolerance.
inline constexpr double kProbSumTolerance = 1e-4;

/// Tokens per chunk of a blocked fixed-point scan (the fast CPU path's blocks, a GPU warp's chunk
/// of 32 lanes × 8 tokens). Integer sums make the token independent of it; one value keeps the
/// implementations' memory layouts and work counts comparable.
inline constexpr int64_t kChunkTokens = 256;

/// The softmax normaliser Σ e_t of a row (core::probs_from_logits, gpu::probs_from_logits, the
/// fused logits verifiers) is summed in blocks of kNormaliserBlockTokens consecutive tokens: within
/// a block, kNormaliserLanes float lane sums (lane k adds the block's tokens t ≡ k mod 16 in
/// ascending order), the lane sums added in double in lane order give the block's total, and the
/// block totals are added in double in block order. The order is fixed, so every implementation
/// forms the same double, while the blocks let a device reduce them in parallel (dependent chains
/// of 128 float adds, not V/16).
inline constexpr int64_t kNormaliserBlockTokens = 2048;
inline constexpr int64_t kNormaliserLanes = 16;
static_assert(kNormaliserBlockTokens % kNormaliserLanes == 0);

/// Largest drafted token tree (nodes, root excluded) a tree verifier accepts: Σ_d Π_{e≤d} k_e.
inline constexpr int64_t kMaxTreeNodes = 4096;

/// Whether a draft token x can have been drawn from its row q: q(x) > 0. A token with q(x) = 0
/// means the q given is not the draft's law (another temperature or filter, raw logits); the chain
/// and block verifiers report it as bad input rather than let the accept tests below reject x.
SPECLAB_HD inline bool drafted_from(float prob_draft) { return prob_draft > 0.0f; }

/// V1 accept test: accept x iff q(x) > 0 and u * q(x) <= p(x), in double.
SPECLAB_HD inline bool token_accepts(double u, float prob_draft, float prob_target) {
#ifdef SPECLAB_MUTANTS
  // Mutant: the product formed in float, which moves the law by rounding only.
  if (mutant(Mutant::kFloatAcceptTest)) {
    return drafted_from(prob_draft) && static_cast<float>(u) * prob_draft <= prob_target;
  }
#endif
  return drafted_from(prob_draft) &&
         u * static_cast<double>(prob_draft) <= static_cast<double>(prob_target);
}

/// V3 accept test with leniency l in (0, 1]: accept iff q(x) > 0 and (u * l) * q(x) <= p(x).
/// l is a float, the same value the residual uses; with l = 1 it is bit-for-bit the V1 test.
SPECLAB_HD inline bool lenient_accepts(double u, float leniency, float prob_draft,
                                       float prob_target) {
#ifdef SPECLAB_MUTANTS
  if (mutant(Mutant::kFloatAcceptTest)) {
    return drafted_from(prob_draft) && static_cast<float>(u) * leniency * prob_draft <= prob_target;
  }
#endif
  return drafted_from(prob_draft) &&
         (u * static_cast<double>(leniency)) * static_cast<double>(prob_draft) <=
             static_cast<double>(prob_target);
}

/// floor(w · 2^58) for w in [0, 32], built from the float's bits: the product is exact (a
/// power-of-two scale), and its integer part is the float's 24-bit significand m shifted by its
/// exponent, m · 2^(e − 150 + 58) for the biased exponent e (the implicit bit set, and e read as 1,
/// for subnormals) — 32-bit right and 64-bit left shifts, which every vector ISA has. Equal to
/// `static_cast<uint64_t>(w * kFixedScale)` for every such float (tested exhaustively).
SPECLAB_HD inline uint64_t fixed_from_bits(float w) {
#if defined(__CUDA_ARCH__)
  const uint32_t bits = __float_as_uint(w);  // sign bit 0
#else
  const uint32_t bits = std::bit_cast<uint32_t>(w);  // sign bit 0
#endif
  const int32_t exponent = static_cast<int32_t>(bits >> 23);
  const uint32_t significand = (bits & 0x7fffffu) | (exponent != 0 ? 0x800000u : 0u);
  const int32_t shift = (exponent != 0 ? exponent : 1) - 92;  // e − 150 + 58, in [−91, 40]
  // m < 2^24, so a right shift of 24 or more gives 0: 31 stands for every larger one.
  const uint32_t right = shift >= 0 ? 0u : static_cast<uint32_t>(shift < -31 ? 31 : -shift);
  const uint32_t left = shift > 0 ? static_cast<uint32_t>(shift) : 0u;
  return static_cast<uint64_t>(significand >> right) << left;
}

/// A weight in [0, ~1] as fixed point: floor(w · 2^58); non-positive weights (and NaN) map to 0.
/// Weights above 32 (never valid; the row checks reject them) are clamped so the value stays
/// below 2^64. Where the ISA converts float → uint64 in one fast instruction (AVX-512DQ) that
/// conversion is used; elsewhere the same integer is built from the bits: on AVX2, where a
/// conversion loop would run scalar, and on the device, where F2I.U64 runs at a fraction of the
/// integer pipes' rate while the shifts and selects of fixed_from_bits run at full rate. Both
/// give the same value for every float.
SPECLAB_HD inline uint64_t to_fixed(float weight) {
  const float positive = weight > 0.0f ? weight : 0.0f;  // selects, not branches: vectorises
  const float clamped = positive < 32.0f ? positive : 32.0f;
#if !defined(__CUDA_ARCH__) && \
    (defined(__AVX512DQ__) || !(defined(__x86_64__) || defined(__i386__)))
  return static_cast<uint64_t>(clamped * kFixedScale);
#else
  return fixed_from_bits(clamped);
#endif
}

/// Residual weight of V1/V3 at one token: max(0, p - l*q) in float, then fixed point. Each float
/// operation is correctly rounded, and speclab compiles with -ffp-contract=off (host) and
/// --fmad=false (device), so no fused multiply-add changes a weight between builds. With l = 1
/// the product is exact and the weight is the rounded difference p - q.
SPECLAB_HD inline uint64_t residual_fixed(float prob_target, float prob_draft, float leniency) {
  const float scaled_draft = leniency * prob_draft;
  return to_fixed(prob_target - scaled_draft);
}

/// Residual weight of V5 at one token: max(0, w·p − q) in float, then fixed point. With w = 1 the
/// product is exact and the weight is bit for bit V1's residual_fixed(p, q, 1).
SPECLAB_HD inline uint64_t block_residual_fixed(float weight, float prob_target, float prob_draft) {
  const float scaled_target = weight * prob_target;
  return to_fixed(scaled_target - prob_draft);
}

/// The inverse-CDF target for a uniform u = (bits + 1/2) / 2^32 over a fixed-point total:
/// floor(u * total), computed exactly in integers. Always < total when total > 0.
SPECLAB_HD inline uint64_t fixed_target(uint32_t bits, uint64_t total) {
  const uint64_t odd = 2ull * bits + 1ull;  // u = odd / 2^33
#if defined(__CUDA_ARCH__)
  const uint64_t lo = odd * total;
  const uint64_t hi = __umul64hi(odd, total);
#else
  const unsigned __int128 prod = static_cast<unsigned __int128>(odd) * total;
  const uint64_t lo = static_cast<uint64_t>(prod);
  const uint64_t hi = static_cast<uint64_t>(prod >> 64);
#endif
  return (hi << 31) | (lo >> 33);
}

}  // namespace speclab
