// Counter-based uniforms (docs/randomness.md): Philox4x32-10 from Random123, addressed by
// (seed; request, step, position, purpose, index) and never by draw order, so the CPU reference
// and the CUDA kernels consume the same uniforms whatever the batching. Compiles under nvcc.
#pragma once

#include <cstdint>

#include "core/base/hd.hpp"

#if defined(__CUDACC__) && !defined(R123_CUDA_DEVICE)
#define R123_CUDA_DEVICE __host__ __device__
#endif
#include <Random123/philox.h>

namespace speclab {

/// What a uniform is used for; part of its address, so two uses never share a uniform.
enum class Purpose : uint32_t {
  kDraftSample = 1,     ///< drawing draft token x_i ~ q_i
  kAcceptTest = 2,      ///< u_i of the accept test at position i
  kResidualSample = 3,  ///< the token drawn from the residual after a rejection
  kBonusSample = 4,     ///< the bonus token drawn from p_{γ+1}
  kPlainSample = 5,     ///< a token of plain (non-speculative) decoding
  kBlockEta = 6,        ///< η_i of block verification (docs/verifiers.md V5)
  kGumbelNoise = 7,     ///< the Gumbel noise of one output position, four tokens per address
};

/// The full address of one uniform. `index` separates several uniforms at one address
/// (e.g. sibling candidates of a tree node); it must stay below 2^24.
struct RandomAddress {
  uint64_t seed = 0;
  uint32_t request = 0;
  uint32_t step = 0;
  uint32_t position = 0;
  Purpose purpose = Purpose::kAcceptTest;
  uint32_t index = 0;
};

/// The four words of Philox4x32-10 at an address: counter = (request, step, position,
/// purpose | index << 8) and key = (seed_lo, seed_hi).
SPECLAB_HD inline r123::Philox4x32::ctr_type philox_block(const RandomAddress& a) {
  r123::Philox4x32 rng;
  r123::Philox4x32::ctr_type ctr = {
      {a.request, a.step, a.position, static_cast<uint32_t>(a.purpose) | (a.index << 8)}};
  r123::Philox4x32::key_type key = {
      {static_cast<uint32_t>(a.seed), static_cast<uint32_t>(a.seed >> 32)}};
  return rng(ctr, key);
}

/// 32 random bits at an address: word 0 of philox_block.
SPECLAB_HD inline uint32_t philox_bits(const RandomAddress& a) { return philox_block(a)[0]; }

/// The uniform in the open interval (0, 1) that 32 random bits stand for: (bits + 1/2) / 2^32.
/// Exact in double, never 0 or 1.
SPECLAB_HD inline double uniform_from_bits(uint32_t bits) {
  return (static_cast<double>(bits) + 0.5) * (1.0 / 4294967296.0);
}

/// The uniform at an address, in (0, 1).
SPECLAB_HD inline double philox_uniform(const RandomAddress& a) {
  return uniform_from_bits(philox_bits(a));
}

}  // namespace speclab
