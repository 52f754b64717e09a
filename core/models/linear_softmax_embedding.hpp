// The hashed context embedding of LinearSoftmax (core/models/linear_softmax.hpp), shared by the
// CPU model and the CUDA one (gpu/models/linear_softmax.cu) so both hash a context identically:
// token t contributes e(t)_k, uniform on [-√3, √3) (unit variance), from a 32-bit hash of
// (seed, t, k); the hidden vector is tanh of the decay-weighted sum over the last n tokens.
#pragma once

#include <cstdint>

#include "core/base/hd.hpp"

namespace speclab::lsm {

/// "lowbias32" (Wellons): a 32-bit mixer cheap enough to vectorise in the embedding loop.
SPECLAB_HD inline uint32_t mix32(uint32_t x) {
  x ^= x >> 16;
  x *= 0x7feb352dU;
  x ^= x >> 15;
  x *= 0x846ca68bU;
  x ^= x >> 16;
  return x;
}

/// The per-token key of token `token` under the family's 32-bit embedding key.
SPECLAB_HD inline uint32_t token_key(int32_t token, uint32_t key32) {
  return mix32(static_cast<uint32_t>(token) * 0x9e3779b9U ^ key32);
}

/// e(t)_k for a token key: uniform on [-√3, √3) in float.
SPECLAB_HD inline float embedding_value(uint32_t token_key, int64_t k) {
  constexpr float kSqrt3 = 1.7320508075688772f;
  constexpr float kScale = 2.0f * kSqrt3 * 0x1p-24f;
  const uint32_t bits = mix32(token_key + static_cast<uint32_t>(k) * 0x85ebca6bU);
  return static_cast<float>(bits >> 8) * kScale + (0.0f - kSqrt3);
}

}  // namespace speclab::lsm
