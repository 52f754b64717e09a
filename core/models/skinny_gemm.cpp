// The skinny product of LinearSoftmax (see skinny_gemm.hpp): panel-major A streamed once,
// R panels × C ≤ 8 columns of 16-lane accumulators held in registers, OpenMP over panel blocks.
#include "core/models/skinny_gemm.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cstdlib>
#include <cstring>
#include <new>
#include <utility>
#include <vector>

#include "core/base/error.hpp"
#include "core/models/simd16.hpp"

namespace speclab {
namespace {

using simd::fma_into;
using simd::kLanes;
using simd::Vec;
static_assert(PanelMatrix::kPanelRows == kLanes);
// Columns per register tile. Wider tiles (16, R = 1) measured ~20% slower at m = 12–16 on
// Zen 5: the 64 KB depth-major column tile no longer fits L1. A second tile re-reads the panel
// block from L2, not from memory.
constexpr int kMaxCols = 8;
constexpr int64_t kBlockPanels = 4;  // panels per OpenMP work item (a multiple of every R)

struct KernelArgs {
  const float* a = nullptr;     // first panel of the group
  int64_t panel_stride = 0;     // floats from one panel to the next
  int64_t depth = 0;            // k steps used
  const float* xt = nullptr;    // column tile, [depth][C]
  const float* bias = nullptr;  // [rows] or null
  float* out = nullptr;
  int64_t ldo = 0;
  int64_t row0 = 0;  // first row of the group
  int64_t rows = 0;  // rows of the whole product (to clip the last panel)
};

// R panels × C columns. Each accumulator lane is one FMA chain over k from bias, whatever R and C.
template <int R, int C>
void panel_kernel(const KernelArgs& g) {
  Vec acc[R][C];
  for (int r = 0; r < R; ++r) {
    Vec init = {};
    if (g.bias != nullptr) {
      const int64_t row = g.row0 + r * kLanes;
      const int64_t n = std::min<int64_t>(kLanes, g.rows - row);
      float lanes[kLanes] = {};
      std::memcpy(lanes, g.bias + row, n * sizeof(float));
      init = simd::load(lanes);
    }
    for (int c = 0; c < C; ++c) acc[r][c] = init;
  }
  const float* a = g.a;
  const float* xt = g.xt;
  for (int64_t k = 0; k < g.depth; ++k) {
    Vec w[R];
#pragma GCC unroll 4
    for (int r = 0; r < R; ++r) {
      w[r] = simd::load(a + r * g.panel_stride + k * kLanes);
    }
#pragma GCC unroll 16
    for (int c = 0; c < C; ++c) {
      const float s = xt[k * C + c];
      const Vec xb = simd::broadcast(s);
#pragma GCC unroll 4
      for (int r = 0; r < R; ++r) fma_into(acc[r][c], w[r], xb);
    }
  }
  for (int r = 0; r < R; ++r) {
    const int64_t row = g.row0 + r * kLanes;
    const int64_t n = std::min<int64_t>(kLanes, g.rows - row);
    for (int c = 0; c < C; ++c) {
      float lanes[kLanes];            // through a buffer: an accumulator whose address is taken is
      simd::store(lanes, acc[r][c]);  // kept in memory, not in registers
      std::memcpy(g.out + c * g.ldo + row, lanes, n * sizeof(float));
    }
  }
}

using Kernel = void (*)(const KernelArgs&);

template <int R, size_t... C>
constexpr std::array<Kernel, kMaxCols + 1> kernel_row(std::index_sequence<C...>) {
  return {nullptr, &panel_kernel<R, static_cast<int>(C) + 1>...};
}
template <int R>
constexpr std::array<Kernel, kMaxCols + 1> kKernels =
    kernel_row<R>(std::make_index_sequence<kMaxCols>{});

// Panels per kernel call for C columns: several FMA chains in flight even for one column, with the
// R·C accumulators and R panel vectors in registers (32 with AVX-512, where a Vec is one; 16 with
// AVX2, where it is two). The tile shape changes no result: each lane is one FMA chain over k.
constexpr int panels_for(int n_cols) {
  if constexpr (simd::kParts == 1) return n_cols <= 4 ? 4 : n_cols <= 8 ? 2 : 1;
  return n_cols <= 2 ? 2 : 1;
}

Kernel kernel_for(int r, int c) {
  switch (r) {
    case 4:
      return kKernels<4>[c];
    case 2:
      return kKernels<2>[c];
    default:
      return kKernels<1>[c];
  }
}

}  // namespace

void PanelMatrix::AlignedFree::operator()(float* p) const { std::free(p); }

PanelMatrix::PanelMatrix(int64_t rows, int64_t depth) : rows_(rows), depth_(depth) {
  if (rows < 0 || depth < 0) {
    throw InvalidInput(
        fmt::format("PanelMatrix: shape {} × {}; expected non-negative", rows, depth));
  }
  const size_t bytes = std::max<size_t>(64, static_cast<size_t>(this->bytes()));
  void* p = std::aligned_alloc(64, (bytes + 63) / 64 * 64);
  if (p == nullptr) throw std::bad_alloc();
  data_.reset(static_cast<float*>(p));
  std::memset(p, 0, bytes);
}

PanelMatrix PanelMatrix::leading_block(int64_t rows, int64_t depth) const {
  if (rows < 0 || rows > rows_ || depth < 0 || depth > depth_) {
    throw InvalidInput(fmt::format("PanelMatrix::leading_block: {} × {} of a {} × {} matrix", rows,
                                   depth, rows_, depth_));
  }
  PanelMatrix block(rows, depth);
  for (int64_t p = 0; p < block.n_panels(); ++p) {
    std::memcpy(block.data() + p * depth * kPanelRows, data() + p * depth_ * kPanelRows,
                depth * kPanelRows * sizeof(float));
  }
  // Rows past `rows` in the last panel were copied too; keep the zero padding invariant.
  for (int64_t i = rows; i < block.n_panels() * kPanelRows; ++i) {
    for (int64_t k = 0; k < depth; ++k) block.at(i, k) = 0.0f;
  }
  return block;
}

void skinny_gemm(const PanelMatrix& a, const SkinnyGemmShape& shape, std::span<const float> x,
                 int64_t ldx, std::span<const float> bias, std::span<float> out, int64_t ldo) {
  const int64_t rows = shape.rows, depth = shape.depth, n_cols = shape.n_cols;
  if (rows < 0 || rows > a.rows() || depth < 0 || depth > a.depth() || n_cols < 0) {
    throw InvalidInput(fmt::format(
        "skinny_gemm: shape rows {} depth {} cols {}; expected rows ≤ {} and depth ≤ {} of A", rows,
        depth, n_cols, a.rows(), a.depth()));
  }
  if (ldx < depth || (n_cols > 0 && static_cast<int64_t>(x.size()) < (n_cols - 1) * ldx + depth)) {
    throw InvalidInput(
        fmt::format("skinny_gemm: x has {} values with ldx {}; expected {} columns "
                    "of depth {}",
                    x.size(), ldx, n_cols, depth));
  }
  if (!bias.empty() && static_cast<int64_t>(bias.size()) < rows) {
    throw InvalidInput(
        fmt::format("skinny_gemm: bias has {} values; expected {} (or none)", bias.size(), rows));
  }
  if (ldo < rows || (n_cols > 0 && static_cast<int64_t>(out.size()) < (n_cols - 1) * ldo + rows)) {
    throw InvalidInput(
        fmt::format("skinny_gemm: out has {} values with ldo {}; expected {} rows "
                    "of {} outputs",
                    out.size(), ldo, n_cols, rows));
  }
  if (rows == 0 || n_cols == 0) return;

  // Column tiles of ≤ kMaxCols, each packed depth-major so one k step reads C adjacent floats.
  const int64_t n_tiles = (n_cols + kMaxCols - 1) / kMaxCols;
  std::vector<float> packed(static_cast<size_t>(n_tiles * kMaxCols * std::max<int64_t>(depth, 1)));
  for (int64_t t = 0; t < n_tiles; ++t) {
    const int64_t c0 = t * kMaxCols;
    const int64_t n_c = std::min<int64_t>(kMaxCols, n_cols - c0);
    float* tile = packed.data() + t * kMaxCols * depth;
    for (int64_t c = 0; c < n_c; ++c) {
      const float* col = x.data() + (c0 + c) * ldx;
      for (int64_t k = 0; k < depth; ++k) tile[k * n_c + c] = col[k];
    }
  }

  const int64_t panel_stride = a.depth() * PanelMatrix::kPanelRows;
  const int64_t n_panels = (rows + kLanes - 1) / kLanes;
  const int64_t n_blocks = (n_panels + kBlockPanels - 1) / kBlockPanels;
  const bool parallel = n_panels * kLanes * depth >= kSkinnyGemmParallelElements;
  const float* bias_ptr = bias.empty() ? nullptr : bias.data();

  // Panel blocks outermost and column tiles inside: A is read from memory once however many
  // tiles there are; the second tile finds the block in cache.
  // Dynamic chunks of 16 blocks (4 MB of A at d = 1024): when another process takes a core, the
  // other thread picks up the remaining rows instead of waiting for it.
#pragma omp parallel for schedule(dynamic, 16) if (parallel)
  for (int64_t b = 0; b < n_blocks; ++b) {
    const int64_t p_end = std::min(n_panels, (b + 1) * kBlockPanels);
    for (int64_t t = 0; t < n_tiles; ++t) {
      const int n_c = static_cast<int>(std::min<int64_t>(kMaxCols, n_cols - t * kMaxCols));
      KernelArgs g{.a = nullptr,
                   .panel_stride = panel_stride,
                   .depth = depth,
                   .xt = packed.data() + t * kMaxCols * depth,
                   .bias = bias_ptr,
                   .out = out.data() + t * kMaxCols * ldo,
                   .ldo = ldo,
                   .row0 = 0,
                   .rows = rows};
      const int r = panels_for(n_c);
      int64_t p = b * kBlockPanels;
      for (; p + r <= p_end; p += r) {
        g.a = a.data() + p * panel_stride;
        g.row0 = p * kLanes;
        kernel_for(r, n_c)(g);
      }
      for (; p < p_end; ++p) {
        g.a = a.data() + p * panel_stride;
        g.row0 = p * kLanes;
        kernel_for(1, n_c)(g);
      }
    }
  }
}

}  // namespace speclab
