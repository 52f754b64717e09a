// QuantMatrix and quant_gemm (see quant_matrix.hpp): skinny_gemm's register tiling with the
// weight load replaced by an in-register dequantisation of a 16-row panel record.
#include "core/models/quant_matrix.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cstdlib>
#include <cstring>
#include <new>
#include <utility>
#include <vector>

#if defined(__AVX512F__) || defined(__AVX2__) || defined(__F16C__)
#include <immintrin.h>
#endif

#include "core/base/error.hpp"
#include "core/models/simd16.hpp"

namespace speclab {
namespace {

using simd::fma_into;
using simd::kLanes;
using simd::Vec;
static_assert(QuantMatrix::kPanelRows == kLanes);

using I32x16 = int32_t __attribute__((vector_size(64)));

constexpr int64_t kQ4_1Record = 320;  // d[16], m[16] as fp16, 16 × 16 bytes of nibble pairs
constexpr int64_t kQ8_0Record = 544;  // d[16] as fp16, 32 × 16 int8
constexpr int64_t kQ4_1Source = 20;   // GGUF block bytes
constexpr int64_t kQ8_0Source = 34;
// Columns per register tile, as in skinny_gemm: the depth-major tile of x stays in L1.
constexpr int kMaxCols = 8;
constexpr int64_t kBlockPanels = 4;  // panels per OpenMP work item (a multiple of every R)
constexpr int64_t kPrefetchRecords = 4;
// Weights above which the product is split over threads: skinny_gemm's threshold, so both
// storages thread the same products (in SmolLM2 only the LM head). Dequantising makes the kernel
// compute-bound, so on an idle machine a second core may pay off for the 0.3–0.9 M-weight layer
// products too; on a loaded one each of a step's ~200 fork/joins can wait a scheduler time slice
// for a descheduled thread, as skinny_gemm's comment says.
constexpr int64_t kParallelWeights = int64_t{1} << 22;

uint16_t load_u16(const std::byte* p) {
  uint16_t v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

// 16 fp16 values at p (unaligned) as floats; the conversion is exact, as fp16_to_float is. Vec
// results go through references, not return values: those would change the ABI (and warn)
// where the library is built without AVX-512.
inline void load_halves(const std::byte* p, Vec& v) {
#if defined(__AVX512F__)
  // The masked form: GCC 12 warns about the unmasked one's undefined pass-through operand.
  v = (Vec)_mm512_maskz_cvtph_ps(0xffff, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
#elif defined(__F16C__)
  __m256 h[2] = {_mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p))),
                 _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p + 16)))};
  std::memcpy(&v, h, sizeof v);
#else
  for (int i = 0; i < kLanes; ++i) v[i] = fp16_to_float(load_u16(p + 2 * i));
#endif
}

// 16 bytes at p widened to 32-bit lanes, zero- or sign-extended. GCC scalarises
// __builtin_convertvector between these widths, so the widening is spelled out per target.
template <bool kSigned>
inline void widen_bytes(const std::byte* p, I32x16& q) {
#if defined(__AVX512F__)
  const __m128i b = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
  // Masked forms: GCC 12 warns about the unmasked ones' undefined pass-through operand.
  q = (I32x16)(kSigned ? _mm512_maskz_cvtepi8_epi32(0xffff, b)
                       : _mm512_maskz_cvtepu8_epi32(0xffff, b));
#elif defined(__AVX2__)
  const __m128i b = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
  const __m128i hi = _mm_unpackhi_epi64(b, b);
  const __m256i q2[2] = {kSigned ? _mm256_cvtepi8_epi32(b) : _mm256_cvtepu8_epi32(b),
                         kSigned ? _mm256_cvtepi8_epi32(hi) : _mm256_cvtepu8_epi32(hi)};
  std::memcpy(&q, q2, sizeof q);
#else
  for (int i = 0; i < kLanes; ++i) {
    q[i] = kSigned ? static_cast<int8_t>(p[i]) : static_cast<uint8_t>(p[i]);
  }
#endif
}

// Weights of columns 2j and 2j + 1 of a Q4_1 record's 16 rows: d·q + m as GGUF's dequantize()
// rounds it, product and sum rounded separately. d·q is exact in float (an 11-bit fp16
// significand times a 4-bit integer, ≥ 2⁻²⁴, far from float's underflow), so the sum is the only
// rounding and one fused multiply-add gives the same bits in one instruction.
inline void dequant_q4_1(const std::byte* pair, const Vec& d, const Vec& m, Vec& w0, Vec& w1) {
  I32x16 q;
  widen_bytes<false>(pair, q);
  const Vec q0 = __builtin_convertvector(q & 15, Vec), q1 = __builtin_convertvector(q >> 4, Vec);
  w0 = m;
  w1 = m;
  fma_into(w0, d, q0);
  fma_into(w1, d, q1);
}

// Weights of column j of a Q8_0 record's 16 rows: d·q.
inline void dequant_q8_0(const std::byte* column, const Vec& d, Vec& w) {
  I32x16 q;
  widen_bytes<true>(column, q);
  w = d * __builtin_convertvector(q, Vec);
}

struct KernelArgs {
  const std::byte* w = nullptr;  // first panel of the group
  int64_t panel_stride = 0;      // bytes from one panel to the next
  int64_t n_blocks = 0;
  const float* xt = nullptr;  // column tile, [depth][C]
  float* out = nullptr;
  int64_t ldo = 0;
  int64_t row0 = 0;  // first row of the group
  int64_t rows = 0;  // rows of the whole product (to clip the last panel)
};

// R panels × C columns; each accumulator lane is one FMA chain over k from 0, as in
// skinny_gemm's panel_kernel, and the dequantised weights of a k step serve all C columns.
template <bool kQ4, int R, int C>
void quant_kernel(const KernelArgs& g) {
  constexpr int64_t record = kQ4 ? kQ4_1Record : kQ8_0Record;
  Vec acc[R][C];
  for (int r = 0; r < R; ++r) {
    for (int c = 0; c < C; ++c) acc[r][c] = Vec{};
  }
  const float* xt = g.xt;
  for (int64_t b = 0; b < g.n_blocks; ++b) {
    const std::byte* rec[R];
    Vec d[R], m[R];
#pragma GCC unroll 4
    for (int r = 0; r < R; ++r) {
      rec[r] = g.w + r * g.panel_stride + b * record;
      // The kernel spends ~30 cycles on a record, too few for the hardware prefetcher to stay a
      // memory latency ahead on R streams; ask for the record kPrefetchRecords ahead.
      for (int64_t line = 0; line < record; line += 64) {
        __builtin_prefetch(rec[r] + kPrefetchRecords * record + line);
      }
      load_halves(rec[r], d[r]);
      if constexpr (kQ4) load_halves(rec[r] + 32, m[r]);
    }
    if constexpr (kQ4) {
      for (int j = 0; j < 16; ++j) {
        Vec w0[R], w1[R];
#pragma GCC unroll 4
        for (int r = 0; r < R; ++r) dequant_q4_1(rec[r] + 64 + 16 * j, d[r], m[r], w0[r], w1[r]);
#pragma GCC unroll 8
        for (int c = 0; c < C; ++c) {
          const float s = xt[(2 * j) * C + c];
          const Vec xb = {s, s, s, s, s, s, s, s, s, s, s, s, s, s, s, s};
#pragma GCC unroll 4
          for (int r = 0; r < R; ++r) fma_into(acc[r][c], w0[r], xb);
        }
#pragma GCC unroll 8
        for (int c = 0; c < C; ++c) {
          const float s = xt[(2 * j + 1) * C + c];
          const Vec xb = {s, s, s, s, s, s, s, s, s, s, s, s, s, s, s, s};
#pragma GCC unroll 4
          for (int r = 0; r < R; ++r) fma_into(acc[r][c], w1[r], xb);
        }
      }
    } else {
      for (int j = 0; j < 32; ++j) {
        Vec w[R];
#pragma GCC unroll 4
        for (int r = 0; r < R; ++r) dequant_q8_0(rec[r] + 32 + 16 * j, d[r], w[r]);
#pragma GCC unroll 8
        for (int c = 0; c < C; ++c) {
          const float s = xt[j * C + c];
          const Vec xb = {s, s, s, s, s, s, s, s, s, s, s, s, s, s, s, s};
#pragma GCC unroll 4
          for (int r = 0; r < R; ++r) fma_into(acc[r][c], w[r], xb);
        }
      }
    }
    xt += QuantMatrix::kBlock * C;
  }
  for (int r = 0; r < R; ++r) {
    const int64_t row = g.row0 + r * kLanes;
    const int64_t n = std::min<int64_t>(kLanes, g.rows - row);
    if (n <= 0) break;
    for (int c = 0; c < C; ++c) std::memcpy(g.out + c * g.ldo + row, &acc[r][c], n * sizeof(float));
  }
}

using Kernel = void (*)(const KernelArgs&);

template <bool kQ4, int R, size_t... C>
constexpr std::array<Kernel, kMaxCols + 1> kernel_row(std::index_sequence<C...>) {
  return {nullptr, &quant_kernel<kQ4, R, static_cast<int>(C) + 1>...};
}
template <bool kQ4, int R>
constexpr std::array<Kernel, kMaxCols + 1> kKernels =
    kernel_row<kQ4, R>(std::make_index_sequence<kMaxCols>{});

// Panels per kernel call for C columns: several FMA chains in flight for one column, and the
// accumulators, dequantised weights and scales within AVX-512's 32 registers.
constexpr int panels_for(int n_cols) { return n_cols <= 4 ? 4 : 2; }

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

// The unsigned 4-bit value of element e (< 32) of a GGUF Q4_1 block's 16 nibble bytes.
uint8_t q4_1_element(const std::byte* qs, int e) {
  const auto byte = static_cast<uint8_t>(qs[e % 16]);
  return e < 16 ? byte & 0x0f : byte >> 4;
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
          std::memcpy(rec + 32 + 2 * lane, src + 2, 2);  // m
          for (int j = 0; j < 16; ++j) {
            const auto pair = static_cast<uint8_t>(q4_1_element(src + 4, 2 * j) |
                                                   q4_1_element(src + 4, 2 * j + 1) << 4);
            rec[64 + 16 * j + lane] = static_cast<std::byte>(pair);
          }
        } else {
          for (int j = 0; j < 32; ++j) rec[32 + 16 * j + lane] = src[2 + j];
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
      for (int j = 0; j < 16; ++j) {
        const auto pair = static_cast<uint8_t>(rec[64 + 16 * j + lane]);
        y[2 * j] = d * static_cast<float>(pair & 0x0f) + m;
        y[2 * j + 1] = d * static_cast<float>(pair >> 4) + m;
      }
    } else {
      for (int j = 0; j < 32; ++j) {
        y[j] = d * static_cast<float>(static_cast<int8_t>(rec[32 + 16 * j + lane]));
      }
    }
  }
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

  // Column tiles of ≤ kMaxCols, each packed depth-major so one k step reads C adjacent floats.
  const int64_t n_tiles = (n_cols + kMaxCols - 1) / kMaxCols;
  std::vector<float> packed(static_cast<size_t>(n_tiles * kMaxCols * depth));
  for (int64_t t = 0; t < n_tiles; ++t) {
    const int64_t c0 = t * kMaxCols;
    const int64_t n_c = std::min<int64_t>(kMaxCols, n_cols - c0);
    float* tile = packed.data() + t * kMaxCols * depth;
    for (int64_t c = 0; c < n_c; ++c) {
      const float* col = x.data() + (c0 + c) * ldx;
      for (int64_t k = 0; k < depth; ++k) tile[k * n_c + c] = col[k];
    }
  }

  const bool q4 = w.type() == GgmlType::kQ4_1;
  const int64_t panel_stride = w.n_blocks() * w.record_bytes();
  const int64_t n_panels = w.n_panels();
  const int64_t n_work = (n_panels + kBlockPanels - 1) / kBlockPanels;
  const bool parallel = n_panels * kLanes * depth >= kParallelWeights;

  // Panel blocks outermost and column tiles inside: the weights are read from memory once
  // however many tiles there are; the second tile finds the block in cache (and dequantises it
  // again, which costs less than re-reading x tiles from a second pass).
#pragma omp parallel for schedule(dynamic, 16) if (parallel)
  for (int64_t item = 0; item < n_work; ++item) {
    const int64_t p_end = std::min(n_panels, (item + 1) * kBlockPanels);
    for (int64_t t = 0; t < n_tiles; ++t) {
      const int n_c = static_cast<int>(std::min<int64_t>(kMaxCols, n_cols - t * kMaxCols));
      KernelArgs g{.w = nullptr,
                   .panel_stride = panel_stride,
                   .n_blocks = w.n_blocks(),
                   .xt = packed.data() + t * kMaxCols * depth,
                   .out = out.data() + t * kMaxCols * ldo,
                   .ldo = ldo,
                   .row0 = 0,
                   .rows = rows};
      const int r = panels_for(n_c);
      int64_t p = item * kBlockPanels;
      for (; p + r <= p_end; p += r) {
        g.w = w.data() + p * panel_stride;
        g.row0 = p * kLanes;
        kernel_for(q4, r, n_c)(g);
      }
      for (; p < p_end; ++p) {
        g.w = w.data() + p * panel_stride;
        g.row0 = p * kLanes;
        kernel_for(q4, 1, n_c)(g);
      }
    }
  }
}

}  // namespace speclab
