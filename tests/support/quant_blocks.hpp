// Random GGUF quantisation blocks for the quantised-matrix tests.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <vector>

#include "core/io/gguf.hpp"
#include "tests/support/test_rng.hpp"

namespace speclab::testing {

/// rows × depth / 32 GGUF blocks of `type` (Q4_1 or Q8_0), row after row: random quants, random
/// fp16 scales (and Q4_1 minimums) in a quantisation scale's range.
inline std::vector<std::byte> random_blocks(GgmlType type, int64_t rows, int64_t depth,
                                            uint64_t seed) {
  TestRng rng{seed};
  const int64_t size = ggml_type_traits(type).block_bytes, n_blocks = rows * depth / 32;
  std::vector<std::byte> data(static_cast<size_t>(n_blocks * size));
  for (int64_t b = 0; b < n_blocks; ++b) {
    std::byte* block = data.data() + b * size;
    for (int64_t i = 0; i < size; ++i) block[i] = static_cast<std::byte>(rng.next() & 0xff);
    const uint16_t d = rng.half(), m = rng.half();
    std::memcpy(block, &d, 2);
    if (type == GgmlType::kQ4_1) std::memcpy(block + 2, &m, 2);
  }
  return data;
}

}  // namespace speclab::testing
