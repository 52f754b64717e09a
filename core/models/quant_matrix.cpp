// QuantMatrix and quant_gemm (see quant_matrix.hpp): activations quantised per 32-weight block to
// 8 bits, integer dot products per block (AVX-512 VNNI, AVX2 maddubs/madd or scalar, chosen at
// compile time), one float scale-and-add per block.
#include "core/models/quant_matrix.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <new>
#include <utility>
#include <vector>

#if defined(__AVX512F__) || defined(__AVX2__) || defined(__F16C__)
#include <immintrin.h>
#endif

#include "core/base/error.hpp"

#if defined(__AVX512VNNI__) && defined(__AVX512BW__) && defined(__AVX512F__)
#define SPECLAB_QUANT_VNNI512 1
#elif defined(__AVX2__) && defined(__FMA__) && defined(__F16C__)
#define SPECLAB_QUANT_AVX2 1
#endif

namespace speclab {
namespace {

constexpr int64_t kRows = QuantMatrix::kPanelRows;
constexpr int64_t kBlock = QuantMatrix::kBlock;
constexpr int64_t kQ4_1Record = 320;  // d[16], m[16] as fp16, 4 × 64 bytes of nibble pairs
constexpr int64_t kQ8_0Record = 544;  // d[16] as fp16, 8 × 64 int8
constexpr int64_t kQ4_1Source = 20;   // GGUF block bytes
constexpr int64_t kQ8_0Source = 34;
// Columns per tile: the quantised activations of a tile and the accumulators stay in registers
// or L1.
constexpr int kMaxCols = 8;
constexpr int64_t kBlockPanels = 4;  // panels per OpenMP work item (a multiple of every R)
[[maybe_unused]] constexpr int64_t kPrefetchRecords = 4;  // unused by the portable kernel
// Weights above which a product is split over threads (in SmolLM2 only the 28 M-weight LM head,
// streamed from memory, where a second core adds bandwidth). The 0.1–0.9 M-weight layer products
// take 2–10 µs on one core: a fork/join per product (~210 per step) costs more than it saves,
// and on a loaded machine each can wait a scheduler time slice for a descheduled thread
// (measured on 2 shared cores: SmolLM2 plain decoding 84 tok/s with this threshold, 53 with
// every layer product threaded).
constexpr int64_t kParallelWeights = int64_t{1} << 22;

uint16_t load_u16(const std::byte* p) {
  uint16_t v;
  std::memcpy(&v, p, sizeof v);
  return v;
}
// Unused by the portable kernel.
[[maybe_unused]] int32_t load_i32(const void* p) {
  int32_t v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

// A tile of ≤ kMaxCols activation columns quantised per 32-element block: for block b and
// column c, q[(b·C + c)·32 + e] = round(x[32b + e]·(1 / d)) (to nearest, ties to even) with
// d = max|x| / 127 over the block, and d, s = d·Σq at [b·C + c].
struct QuantTile {
  const int8_t* q = nullptr;
  const float* d = nullptr;
  const float* s = nullptr;
};

void quantise_column(const float* x, int64_t n_blocks, int n_c, int c, int8_t* q, float* d,
                     float* s) {
  for (int64_t b = 0; b < n_blocks; ++b) {
    const float* xb = x + b * kBlock;
    float amax = 0.0f;
    // A NaN or infinite activation makes the block's scale non-finite, so the column's outputs
    // are NaN or infinite as the fp32 product's would be (std::max would drop a NaN).
    for (int e = 0; e < kBlock; ++e) {
      const float a = std::abs(xb[e]);
      if (a > amax || std::isnan(a)) amax = std::isnan(amax) ? amax : a;
    }
    const float scale = amax / 127.0f;
    const float inv = scale != 0.0f ? 1.0f / scale : 0.0f;
    int8_t* qb = q + (b * n_c + c) * kBlock;
    int sum = 0;
    for (int e = 0; e < kBlock; ++e) {
      // |x·inv| ≤ 127 up to rounding; the clamp keeps a rounding up of 127.00001 in range.
      const float v = std::min(127.0f, std::max(-127.0f, std::nearbyint(xb[e] * inv)));
      qb[e] = static_cast<int8_t>(v);
      sum += qb[e];
    }
    d[b * n_c + c] = scale;
    s[b * n_c + c] = scale * static_cast<float>(sum);
  }
}

struct KernelArgs {
  const std::byte* w = nullptr;  // first panel of the group
  int64_t panel_stride = 0;      // bytes from one panel to the next
  int64_t n_blocks = 0;
  QuantTile x;
  float* out = nullptr;
  int64_t ldo = 0;
  int64_t row0 = 0;  // first row of the group
  int64_t rows = 0;  // rows of the whole product (to clip the last panel)
};

// Every kernel computes, for each row i and column c, the float chain
//   acc = 0; for each block b: acc = fma(float(Σ_e q_w·q_x), d_w·d_x, acc);
//                              Q4_1: acc = fma(m_w, s_x, acc)
// with the integer sums exact, so every ISA's kernel returns the same bits.

[[maybe_unused]] void store_rows(const KernelArgs& g, int64_t row, int c, const float* acc,
                                 int64_t lanes) {
  const int64_t n = std::min<int64_t>(lanes, g.rows - row);
  if (n > 0) std::memcpy(g.out + c * g.ldo + row, acc, n * sizeof(float));
}

#if defined(SPECLAB_QUANT_VNNI512)
// R panels × C columns in 16-lane registers, one lane per row (the masked intrinsics: GCC 12
// warns about the unmasked ones' undefined pass-through operand); a 32-bit lane holds 4 consecutive
// weights of its row, so one vpdpbusd is 64 multiply-adds.
template <bool kQ4, int R, int C>
void quant_kernel(const KernelArgs& g) {
  constexpr int64_t record = kQ4 ? kQ4_1Record : kQ8_0Record;
  __m512 acc[R][C];
  for (int r = 0; r < R; ++r) {
    for (int c = 0; c < C; ++c) acc[r][c] = _mm512_setzero_ps();
  }
  const __m512i low4 = _mm512_set1_epi8(0x0f), ones = _mm512_set1_epi8(1);
  const __m512i bias = _mm512_set1_epi8(static_cast<char>(0x80));
  for (int64_t b = 0; b < g.n_blocks; ++b) {
    const std::byte* rec[R];
#pragma GCC unroll 4
    for (int r = 0; r < R; ++r) {
      rec[r] = g.w + r * g.panel_stride + b * record;
      for (int64_t line = 0; line < record; line += 64) {
        __builtin_prefetch(rec[r] + kPrefetchRecords * record + line);
      }
    }
    const int8_t* xq = g.x.q + b * C * kBlock;
    __m512i dot[R][C];
    for (int r = 0; r < R; ++r) {
      for (int c = 0; c < C; ++c) dot[r][c] = _mm512_setzero_si512();
    }
    if constexpr (kQ4) {
#pragma GCC unroll 4
      for (int t = 0; t < 4; ++t) {
        __m512i lo[R], hi[R];
#pragma GCC unroll 4
        for (int r = 0; r < R; ++r) {
          const __m512i v = _mm512_loadu_si512(rec[r] + 64 + 64 * t);
          lo[r] = _mm512_and_si512(v, low4);
          hi[r] = _mm512_and_si512(_mm512_maskz_srli_epi16(~__mmask32{0}, v, 4), low4);
        }
#pragma GCC unroll 8
        for (int c = 0; c < C; ++c) {
          const __m512i xl = _mm512_set1_epi32(load_i32(xq + c * kBlock + 4 * t));
          const __m512i xh = _mm512_set1_epi32(load_i32(xq + c * kBlock + 16 + 4 * t));
#pragma GCC unroll 4
          for (int r = 0; r < R; ++r) {
            dot[r][c] = _mm512_dpbusd_epi32(dot[r][c], lo[r], xl);
            dot[r][c] = _mm512_dpbusd_epi32(dot[r][c], hi[r], xh);
          }
        }
      }
    } else {
      // vpdpbusd multiplies unsigned by signed bytes: x + 128 (unsigned) times w, less 128·Σw.
      __m512i wsum[R];
      for (int r = 0; r < R; ++r) wsum[r] = _mm512_setzero_si512();
#pragma GCC unroll 8
      for (int t = 0; t < 8; ++t) {
        __m512i w[R];
#pragma GCC unroll 4
        for (int r = 0; r < R; ++r) {
          w[r] = _mm512_loadu_si512(rec[r] + 32 + 64 * t);
          wsum[r] = _mm512_dpbusd_epi32(wsum[r], ones, w[r]);
        }
#pragma GCC unroll 8
        for (int c = 0; c < C; ++c) {
          const __m512i xb =
              _mm512_xor_si512(_mm512_set1_epi32(load_i32(xq + c * kBlock + 4 * t)), bias);
#pragma GCC unroll 4
          for (int r = 0; r < R; ++r) dot[r][c] = _mm512_dpbusd_epi32(dot[r][c], xb, w[r]);
        }
      }
      for (int r = 0; r < R; ++r) {
        const __m512i corr = _mm512_maskz_slli_epi32(0xffff, wsum[r], 7);
        for (int c = 0; c < C; ++c) dot[r][c] = _mm512_sub_epi32(dot[r][c], corr);
      }
    }
#pragma GCC unroll 4
    for (int r = 0; r < R; ++r) {
      const __m512 dw = _mm512_maskz_cvtph_ps(
          0xffff, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(rec[r])));
      __m512 mw = _mm512_setzero_ps();
      if constexpr (kQ4) {
        mw = _mm512_maskz_cvtph_ps(
            0xffff, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(rec[r] + 32)));
      }
#pragma GCC unroll 8
      for (int c = 0; c < C; ++c) {
        const __m512 scale = _mm512_mul_ps(dw, _mm512_set1_ps(g.x.d[b * C + c]));
        acc[r][c] = _mm512_fmadd_ps(_mm512_maskz_cvtepi32_ps(0xffff, dot[r][c]), scale, acc[r][c]);
        if constexpr (kQ4) {
          acc[r][c] = _mm512_fmadd_ps(mw, _mm512_set1_ps(g.x.s[b * C + c]), acc[r][c]);
        }
      }
    }
  }
  for (int r = 0; r < R; ++r) {
    for (int c = 0; c < C; ++c) {
      alignas(64) float lanes[16];
      _mm512_store_ps(lanes, acc[r][c]);
      store_rows(g, g.row0 + r * kRows, c, lanes, 16);
    }
  }
}
constexpr int panels_for(int n_cols) { return n_cols <= 2 ? 4 : n_cols <= 4 ? 2 : 1; }

#elif defined(SPECLAB_QUANT_AVX2)
// R half panels (8 rows each: a record's first or second half) × C columns in 8-lane registers;
// vpmaddubsw + vpmaddwd do what one vpdpbusd does. Q4_1: the 8 products of a block fit int16
// (2·15·127·8 < 2¹⁵) and are widened once; Q8_0 uses |w| times x with w's sign (2·128·127 <
// 2¹⁵ per pair) and widens each step.
template <bool kQ4, int R, int C>
void quant_kernel(const KernelArgs& g) {
  constexpr int64_t record = kQ4 ? kQ4_1Record : kQ8_0Record;
  constexpr int kUnits = 2 * R;  // half panels
  __m256 acc[kUnits][C];
  for (int u = 0; u < kUnits; ++u) {
    for (int c = 0; c < C; ++c) acc[u][c] = _mm256_setzero_ps();
  }
  const __m256i low4 = _mm256_set1_epi8(0x0f), ones16 = _mm256_set1_epi16(1);
  for (int64_t b = 0; b < g.n_blocks; ++b) {
    const std::byte* rec[R];
    for (int r = 0; r < R; ++r) {
      rec[r] = g.w + r * g.panel_stride + b * record;
      for (int64_t line = 0; line < record; line += 64) {
        __builtin_prefetch(rec[r] + kPrefetchRecords * record + line);
      }
    }
    const int8_t* xq = g.x.q + b * C * kBlock;
// One half panel at a time: unrolled, the scheduler interleaves them and spills.
#pragma GCC unroll 1
    for (int u = 0; u < kUnits; ++u) {
      const std::byte* p = rec[u / 2];
      const int64_t half = 32 * (u % 2);
      __m256i dot[C];
      if constexpr (kQ4) {
        // The block's 4 × 2 nibble vectors first, then one column at a time: a column's int16
        // sum lives in one register, so wide tiles do not spill the sums the inner loop updates
        // (16 registers); an accumulator is touched once per block and may live in L1.
        __m256i lo[4], hi[4];
#pragma GCC unroll 4
        for (int t = 0; t < 4; ++t) {
          const __m256i v =
              _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + 64 + 64 * t + half));
          lo[t] = _mm256_and_si256(v, low4);
          hi[t] = _mm256_and_si256(_mm256_srli_epi16(v, 4), low4);
        }
#pragma GCC unroll 8
        for (int c = 0; c < C; ++c) {
          __m256i sum16 = _mm256_setzero_si256();
#pragma GCC unroll 4
          for (int t = 0; t < 4; ++t) {
            const __m256i xl = _mm256_set1_epi32(load_i32(xq + c * kBlock + 4 * t));
            const __m256i xh = _mm256_set1_epi32(load_i32(xq + c * kBlock + 16 + 4 * t));
            sum16 = _mm256_add_epi16(sum16, _mm256_maddubs_epi16(lo[t], xl));
            sum16 = _mm256_add_epi16(sum16, _mm256_maddubs_epi16(hi[t], xh));
          }
          dot[c] = _mm256_madd_epi16(sum16, ones16);
        }
      } else {
        for (int c = 0; c < C; ++c) dot[c] = _mm256_setzero_si256();
#pragma GCC unroll 8
        for (int t = 0; t < 8; ++t) {
          const __m256i w =
              _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + 32 + 64 * t + half));
          const __m256i wabs = _mm256_sign_epi8(w, w);
#pragma GCC unroll 8
          for (int c = 0; c < C; ++c) {
            const __m256i xs =
                _mm256_sign_epi8(_mm256_set1_epi32(load_i32(xq + c * kBlock + 4 * t)), w);
            dot[c] =
                _mm256_add_epi32(dot[c], _mm256_madd_epi16(_mm256_maddubs_epi16(wabs, xs), ones16));
          }
        }
      }
      const int64_t hscale = 16 * (u % 2);
      const __m256 dw =
          _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p + hscale)));
      __m256 mw = _mm256_setzero_ps();
      if constexpr (kQ4) {
        mw = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p + 32 + hscale)));
      }
#pragma GCC unroll 8
      for (int c = 0; c < C; ++c) {
        const __m256 scale = _mm256_mul_ps(dw, _mm256_set1_ps(g.x.d[b * C + c]));
        acc[u][c] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(dot[c]), scale, acc[u][c]);
        if constexpr (kQ4) {
          acc[u][c] = _mm256_fmadd_ps(mw, _mm256_set1_ps(g.x.s[b * C + c]), acc[u][c]);
        }
      }
    }
  }
  for (int u = 0; u < kUnits; ++u) {
    for (int c = 0; c < C; ++c) {
      alignas(32) float lanes[8];
      _mm256_store_ps(lanes, acc[u][c]);
      store_rows(g, g.row0 + 8 * u, c, lanes, 8);
    }
  }
}
constexpr int panels_for(int n_cols) { return n_cols <= 2 ? 2 : 1; }

#else
// Portable: the same integer sums and the same float chain, one row at a time.
template <bool kQ4, int R, int C>
void quant_kernel(const KernelArgs& g) {
  constexpr int64_t record = kQ4 ? kQ4_1Record : kQ8_0Record;
  for (int r = 0; r < R; ++r) {
    for (int64_t i = 0; i < kRows; ++i) {
      float acc[C] = {};
      for (int64_t b = 0; b < g.n_blocks; ++b) {
        const std::byte* rec = g.w + r * g.panel_stride + b * record;
        const int8_t* xq = g.x.q + b * C * kBlock;
        const float dw = fp16_to_float(load_u16(rec + 2 * i));
        for (int c = 0; c < C; ++c) {
          int32_t dot = 0;
          for (int e = 0; e < kBlock; ++e) {
            const int t = (e % 16) / 4, u = e % 4;
            int32_t q;
            if constexpr (kQ4) {
              const auto pair = static_cast<uint8_t>(rec[64 + 64 * t + 4 * i + u]);
              q = e < 16 ? pair & 0x0f : pair >> 4;
            } else {
              q = static_cast<int8_t>(rec[32 + 64 * (e / 4) + 4 * i + u]);
            }
            dot += q * xq[c * kBlock + e];
          }
          acc[c] = std::fma(static_cast<float>(dot), dw * g.x.d[b * C + c], acc[c]);
          if constexpr (kQ4) {
            acc[c] = std::fma(fp16_to_float(load_u16(rec + 32 + 2 * i)), g.x.s[b * C + c], acc[c]);
          }
        }
      }
      const int64_t row = g.row0 + r * kRows + i;
      if (row >= g.rows) break;
      for (int c = 0; c < C; ++c) g.out[c * g.ldo + row] = acc[c];
    }
  }
}
constexpr int panels_for(int) { return 1; }
#endif

using Kernel = void (*)(const KernelArgs&);

template <bool kQ4, int R, size_t... C>
constexpr std::array<Kernel, kMaxCols + 1> kernel_row(std::index_sequence<C...>) {
  return {nullptr, &quant_kernel<kQ4, R, static_cast<int>(C) + 1>...};
}
template <bool kQ4, int R>
constexpr std::array<Kernel, kMaxCols + 1> kKernels =
    kernel_row<kQ4, R>(std::make_index_sequence<kMaxCols>{});

Kernel kernel_for(bool q4, int r, int c) {
  switch (r) {
    case 4:
      return q4 ? kKernels<true, 4>[c] : kKernels<false, 4>[c];
    case 2:
      return q4 ? kKernels<true, 2>[c] : kKernels<false, 2>[c];
    default:
      return q4 ? kKernels<true, 1>[c] : kKernels<false, 1>[c];
  }
}

}  // namespace

void QuantMatrix::AlignedFree::operator()(std::byte* p) const { std::free(p); }

int64_t QuantMatrix::record_bytes() const {
  return type_ == GgmlType::kQ4_1 ? kQ4_1Record : kQ8_0Record;
}

QuantMatrix::QuantMatrix(GgmlType type, std::span<const std::byte> blocks, int64_t rows,
                         int64_t depth)
    : type_(type), rows_(rows), depth_(depth) {
  if (type != GgmlType::kQ4_1 && type != GgmlType::kQ8_0) {
    throw InvalidInput(
        fmt::format("QuantMatrix: type {}; expected Q4_1 or Q8_0 (use PanelMatrix "
                    "for float weights)",
                    ggml_type_name(type)));
  }
  if (rows < 0 || depth <= 0 || depth % kBlock != 0) {
    throw InvalidInput(fmt::format(
        "QuantMatrix: shape {} × {}; expected rows ≥ 0 and depth a positive multiple of {}", rows,
        depth, kBlock));
  }
  const bool q4 = type == GgmlType::kQ4_1;
  const int64_t source = q4 ? kQ4_1Source : kQ8_0Source;
  const int64_t expected = rows * n_blocks() * source;
  if (static_cast<int64_t>(blocks.size()) != expected) {
    throw InvalidInput(
        fmt::format("QuantMatrix: {} bytes of {} blocks for {} × {}; expected {} ({} per block)",
                    blocks.size(), ggml_type_name(type), rows, depth, expected, source));
  }
  const size_t n_bytes = std::max<size_t>(64, static_cast<size_t>(bytes()));
  void* p = std::aligned_alloc(64, (n_bytes + 63) / 64 * 64);
  if (p == nullptr) throw std::bad_alloc();
  data_.reset(static_cast<std::byte*>(p));
  std::memset(p, 0, n_bytes);  // padding rows: d = m = q = 0, weight 0

  const int64_t nb = n_blocks(), rec_bytes = record_bytes(), n_p = n_panels();
#pragma omp parallel for schedule(static)
  for (int64_t panel = 0; panel < n_p; ++panel) {
    for (int64_t b = 0; b < nb; ++b) {
      std::byte* rec = data_.get() + (panel * nb + b) * rec_bytes;
      for (int64_t lane = 0; lane < kPanelRows; ++lane) {
        const int64_t row = panel * kPanelRows + lane;
        if (row >= rows) break;
        const std::byte* src = blocks.data() + (row * nb + b) * source;
        std::memcpy(rec + 2 * lane, src, 2);  // d
        if (q4) {
          // GGUF's byte e holds elements e (low nibble) and e + 16: chunk t takes bytes 4t … 4t+3.
          std::memcpy(rec + 32 + 2 * lane, src + 2, 2);  // m
          for (int t = 0; t < 4; ++t) std::memcpy(rec + 64 + 64 * t + 4 * lane, src + 4 + 4 * t, 4);
        } else {
          for (int t = 0; t < 8; ++t) std::memcpy(rec + 32 + 64 * t + 4 * lane, src + 2 + 4 * t, 4);
        }
      }
    }
  }
}

void QuantMatrix::dequantize_row(int64_t row, std::span<float> out) const {
  if (row < 0 || row >= rows_ || static_cast<int64_t>(out.size()) != depth_) {
    throw InvalidInput(
        fmt::format("QuantMatrix::dequantize_row: row {} into {} floats; expected 0 ≤ row < {} "
                    "and {} floats",
                    row, out.size(), rows_, depth_));
  }
  const int64_t panel = row / kPanelRows, lane = row % kPanelRows, nb = n_blocks();
  for (int64_t b = 0; b < nb; ++b) {
    const std::byte* rec = data_.get() + (panel * nb + b) * record_bytes();
    const float d = fp16_to_float(load_u16(rec + 2 * lane));
    float* y = out.data() + b * kBlock;
    if (type_ == GgmlType::kQ4_1) {
      const float m = fp16_to_float(load_u16(rec + 32 + 2 * lane));
      for (int e = 0; e < 16; ++e) {
        const auto pair = static_cast<uint8_t>(rec[64 + 64 * (e / 4) + 4 * lane + e % 4]);
        y[e] = d * static_cast<float>(pair & 0x0f) + m;
        y[e + 16] = d * static_cast<float>(pair >> 4) + m;
      }
    } else {
      for (int e = 0; e < 32; ++e) {
        y[e] =
            d * static_cast<float>(static_cast<int8_t>(rec[32 + 64 * (e / 4) + 4 * lane + e % 4]));
      }
    }
  }
}

const char* quant_gemm_isa() {
#if defined(SPECLAB_QUANT_VNNI512)
  return "avx512-vnni";
#elif defined(SPECLAB_QUANT_AVX2)
  return "avx2";
#else
  return "scalar";
#endif
}

void quant_gemm(const QuantMatrix& w, std::span<const float> x, int64_t n_cols, int64_t ldx,
                std::span<float> out, int64_t ldo) {
  const int64_t rows = w.rows(), depth = w.depth();
  if (n_cols < 0) {
    throw InvalidInput(fmt::format("quant_gemm: n_cols is {}; expected ≥ 0", n_cols));
  }
  if (ldx < depth || (n_cols > 0 && static_cast<int64_t>(x.size()) < (n_cols - 1) * ldx + depth)) {
    throw InvalidInput(fmt::format(
        "quant_gemm: x has {} values with ldx {}; expected {} columns of depth {} (ldx ≥ depth)",
        x.size(), ldx, n_cols, depth));
  }
  if (ldo < rows || (n_cols > 0 && static_cast<int64_t>(out.size()) < (n_cols - 1) * ldo + rows)) {
    throw InvalidInput(fmt::format(
        "quant_gemm: out has {} values with ldo {}; expected {} columns of {} outputs (ldo ≥ rows)",
        out.size(), ldo, n_cols, rows));
  }
  if (rows == 0 || n_cols == 0) return;

  // Column tiles of ≤ kMaxCols, each quantised block-major so one block step reads the C
  // columns' 32 bytes adjacently.
  const int64_t nb = w.n_blocks();
  const int64_t n_tiles = (n_cols + kMaxCols - 1) / kMaxCols;
  thread_local std::vector<int8_t> xq;
  thread_local std::vector<float> xd, xs;
  xq.resize(static_cast<size_t>(n_cols * depth));
  xd.resize(static_cast<size_t>(n_cols * nb));
  xs.resize(xd.size());
  for (int64_t t = 0; t < n_tiles; ++t) {
    const int64_t c0 = t * kMaxCols;
    const int n_c = static_cast<int>(std::min<int64_t>(kMaxCols, n_cols - c0));
    for (int c = 0; c < n_c; ++c) {
      quantise_column(x.data() + (c0 + c) * ldx, nb, n_c, c, xq.data() + c0 * depth,
                      xd.data() + c0 * nb, xs.data() + c0 * nb);
    }
  }

  const bool q4 = w.type() == GgmlType::kQ4_1;
  const int64_t panel_stride = nb * w.record_bytes();
  const int64_t n_panels = w.n_panels();
  const int64_t n_work = (n_panels + kBlockPanels - 1) / kBlockPanels;
  const bool parallel = n_panels * kRows * depth >= kParallelWeights;
  const int8_t* q_all = xq.data();
  const float *d_all = xd.data(), *s_all = xs.data();

  // Panel blocks outermost and column tiles inside: the weights are read from memory once
  // however many tiles there are; the second tile finds the block in cache.
#pragma omp parallel for schedule(static) if (parallel)
  for (int64_t item = 0; item < n_work; ++item) {
    const int64_t p_end = std::min(n_panels, (item + 1) * kBlockPanels);
    for (int64_t t = 0; t < n_tiles; ++t) {
      const int64_t c0 = t * kMaxCols;
      const int n_c = static_cast<int>(std::min<int64_t>(kMaxCols, n_cols - c0));
      KernelArgs g{.w = nullptr,
                   .panel_stride = panel_stride,
                   .n_blocks = nb,
                   .x = {q_all + c0 * depth, d_all + c0 * nb, s_all + c0 * nb},
                   .out = out.data() + c0 * ldo,
                   .ldo = ldo,
                   .row0 = 0,
                   .rows = rows};
      const int r = panels_for(n_c);
      int64_t p = item * kBlockPanels;
      for (; p + r <= p_end; p += r) {
        g.w = w.data() + p * panel_stride;
        g.row0 = p * kRows;
        kernel_for(q4, r, n_c)(g);
      }
      for (; p < p_end; ++p) {
        g.w = w.data() + p * panel_stride;
        g.row0 = p * kRows;
        kernel_for(q4, 1, n_c)(g);
      }
    }
  }
}

}  // namespace speclab
