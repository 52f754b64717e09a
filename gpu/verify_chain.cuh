// Chain verifier kernels V1-V3 (docs/verifiers.md), one CTA per request, following
// core/verify/verify_chain_fast:
//  1. warp 0 checks n_draft and the draft tokens, then (V1/V3) runs the accept tests 32 positions
//  at
//     a time: lane i gathers p_i(x_i), q_i(x_i), draws u_i (Philox, docs/randomness.md) and
//     tests; a ballot finds the first rejection (or the first bad gathered value);
//  2. V1/V3: one pass over the residual row max(0, p - l·q) (or the bonus row p) in chunks of 256
//     tokens: warps stride over chunks, lane k loads tokens k, k+32, ... (coalesced), sums
//     fixed-point weights (core/base/rules.hpp) and checks the values; a warp sum gives each
//     chunk's total in shared memory. A block exclusive scan over per-thread runs of chunk totals
//     (shuffles + shared memory) gives every chunk's prefix and the row total; the one chunk whose
//     [prefix, prefix + total) holds fixed_target(bits, total) is rescanned by warp 0 with a warp
//     scan and a ballot. Integer sums are exact, so this is core's inverse-CDF token bit for bit.
//     V2: a block argmax (lowest id on ties) per row read, fused with the same checks.
// Bytes read per request b (γ_b = n_draft[b], n = accepted): V1/V3 4γ_b (tokens) + at most
// 2·32 B sectors per gathered position + 4V (bonus row) or 8V (residual row), plus 4V more only
// in the rare residual fallback; V2 4γ_b + 4V·(n+1). Every probability row is read at most once.
#pragma once

#include <cstdint>

#include "core/base/philox.hpp"
#include "core/base/rules.hpp"
#include "core/verify/verify_chain.hpp"
#include "gpu/simt.cuh"
#include "gpu/verify_chain.hpp"

namespace speclab::gpu::detail {

inline constexpr unsigned kFullMask = 0xffffffffu;
inline constexpr int kWarpSize = 32;
inline constexpr int kLaneTokens = 8;  // tokens per lane per chunk
// A warp's chunk is core's blocked-scan chunk (core/base/rules.hpp).
static_assert(kChunkTokens == kWarpSize * kLaneTokens);
inline constexpr float kFloatMax = 3.40282347e38f;

/// Everything a block needs, passed by value. Pointers are device memory.
struct ChainKernelArgs {
  const float* probs_target;    // [B, γ+1, V]
  const float* probs_draft;     // [B, γ, V] or null (V2)
  const int32_t* draft_tokens;  // [B, γ]
  const int32_t* n_draft;       // [B] or null (all γ)
  const uint32_t* request_ids;  // [B] or null (0..B-1)
  int32_t* emitted_tokens;      // [B, γ+1]
  int32_t* n_accepted;          // [B]
  uint8_t* accept_mask;         // [B, γ]
  uint8_t* residual_fallback;   // [B]
  uint32_t* status;             // [B]
  int64_t gamma;
  int64_t vocab;
  int64_t n_chunks;  // ⌈V / kChunkTokens⌉
  int method;        // ChainMethod
  float leniency;    // 1 for V1
  uint64_t seed;
  uint32_t step;
  const DeviceSeedStep* seed_step;  // when set, seed and step are read from it
};

/// The seed and step of a launch: from device memory when the launcher was given a word there.
template <class Args>
__device__ inline void launch_seed_step(const Args& a, uint64_t* seed, uint32_t* step) {
  if (a.seed_step != nullptr) {
    *seed = a.seed_step->seed;
    *step = a.seed_step->step;
  } else {
    *seed = a.seed;
    *step = a.step;
  }
}

/// A probability row in memory, read as p(t): the accessor the row passes take, so the fused
/// logits kernels (gpu/fused_logits.cuh) can pass rows that compute p(t) instead.
struct ProbRowRef {
  const float* p;
  __device__ float operator()(int64_t t) const { return p[t]; }
};

/// Block-wide scratch at the start of dynamic shared memory (poisoned per block in emulation).
struct BlockScratch {
  uint64_t warp_totals[kWarpSize];
  double warp_sums[kWarpSize][2];
  float warp_best_value[kWarpSize];
  int32_t warp_best_index[kWarpSize];
  uint64_t total;
  double sums[2];
  float best_value;
  int32_t best_index;
};

/// The request's state, shared by its threads; written by one thread between barriers.
struct RequestState {
  int64_t n_draft;
  int64_t n;  // accepted draft tokens
  int64_t chunk;
  uint64_t chunk_base;
  uint32_t status;
  int32_t last;  // the token after the accepted prefix
  int32_t fallback;
};

__device__ inline bool valid_probability(float x) { return x >= 0.0f && x <= kFloatMax; }

// A gathered p(x) or q(x): as core's validate_probability_value, finite and in [0, 1 + 1e-4].
__device__ inline bool valid_gathered(float x) {
  return valid_probability(x) && static_cast<double>(x) <= 1.0 + kProbSumTolerance;
}

__device__ inline bool sum_ok(double sum) {
  const double off = sum - 1.0;
  return off <= kProbSumTolerance && -off <= kProbSumTolerance;
}

template <KernelMutant kMutant>
__device__ uint64_t warp_sum(uint64_t v) {
  const unsigned mask = kMutant == KernelMutant::kShuffleMask ? 0x0000ffffu : kFullMask;
  for (int offset = kWarpSize / 2; offset > 0; offset >>= 1) v += __shfl_xor_sync(mask, v, offset);
  return v;
}

__device__ inline double warp_sum_double(double v) {
  for (int offset = kWarpSize / 2; offset > 0; offset >>= 1) {
    v += __shfl_xor_sync(kFullMask, v, offset);
  }
  return v;
}

template <KernelMutant kMutant>
__device__ uint64_t warp_inclusive_scan(uint64_t v, int lane) {
  for (int offset = kMutant == KernelMutant::kShuffleOffset ? 2 : 1; offset < kWarpSize;
       offset <<= 1) {
    const uint64_t below = __shfl_up_sync(kFullMask, v, static_cast<unsigned>(offset));
    if (lane >= offset) v += below;
  }
  return v;
}

/// Exclusive prefix of v over the block's threads in thread order; *total gets the block total.
template <KernelMutant kMutant>
__device__ uint64_t block_exclusive_scan(uint64_t v, BlockScratch* scratch, uint64_t* total) {
  const int lane = static_cast<int>(threadIdx.x) % kWarpSize;
  const int warp = static_cast<int>(threadIdx.x) / kWarpSize;
  const int n_warps = static_cast<int>(blockDim.x) / kWarpSize;
  const uint64_t inclusive = warp_inclusive_scan<kMutant>(v, lane);
  if (lane == kWarpSize - 1) scratch->warp_totals[warp] = inclusive;
  if constexpr (kMutant != KernelMutant::kMissingSync) __syncthreads();
  if (warp == 0) {
    const uint64_t w = lane < n_warps ? scratch->warp_totals[lane] : 0;
    const uint64_t w_inclusive = warp_inclusive_scan<kMutant>(w, lane);
    if (lane < n_warps) scratch->warp_totals[lane] = w_inclusive - w;
    if (lane == kWarpSize - 1) scratch->total = w_inclusive;
  }
  __syncthreads();
  *total = scratch->total;
  const uint64_t exclusive = scratch->warp_totals[warp] + inclusive - v;
  __syncthreads();  // the scratch may be reused once every thread has read it
  return exclusive;
}

/// Block sums of two doubles (row sums for the 1 ± 1e-4 check), broadcast to every thread.
__device__ inline void block_sum2(double* a, double* b, BlockScratch* scratch) {
  const int lane = static_cast<int>(threadIdx.x) % kWarpSize;
  const int warp = static_cast<int>(threadIdx.x) / kWarpSize;
  const int n_warps = static_cast<int>(blockDim.x) / kWarpSize;
  const double wa = warp_sum_double(*a), wb = warp_sum_double(*b);
  if (lane == 0) {
    scratch->warp_sums[warp][0] = wa;
    scratch->warp_sums[warp][1] = wb;
  }
  __syncthreads();
  if (warp == 0) {
    const double ta = warp_sum_double(lane < n_warps ? scratch->warp_sums[lane][0] : 0.0);
    const double tb = warp_sum_double(lane < n_warps ? scratch->warp_sums[lane][1] : 0.0);
    if (lane == 0) {
      scratch->sums[0] = ta;
      scratch->sums[1] = tb;
    }
  }
  __syncthreads();
  *a = scratch->sums[0];
  *b = scratch->sums[1];
  __syncthreads();
}

// The better of two (value, index) candidates: larger value, then lower index (docs/verifiers.md
// V2).
__device__ inline void take_better(float* value, int32_t* index, float other_value,
                                   int32_t other_index) {
  if (other_value > *value || (other_value == *value && other_index < *index)) {
    *value = other_value;
    *index = other_index;
  }
}

/// Argmax of one row with the lowest id on ties, fused with the row checks. Returns the token;
/// *bad is set (block-uniform) when a value is NaN/inf/negative or the row sum is off.
__device__ inline int32_t block_argmax_checked(const float* row, int64_t vocab,
                                               BlockScratch* scratch, uint32_t* bad) {
  const int lane = static_cast<int>(threadIdx.x) % kWarpSize;
  const int warp = static_cast<int>(threadIdx.x) / kWarpSize;
  const int n_warps = static_cast<int>(blockDim.x) / kWarpSize;
  float best = -1.0f;  // below every valid probability
  int32_t best_index = 0x7fffffff;
  double sum = 0.0, unused = 0.0;
  int invalid = 0;
  for (int64_t t = threadIdx.x; t < vocab; t += blockDim.x) {  // grid-stride over the row
    const float v = row[t];
    invalid |= !valid_probability(v);
    sum += v;
    if (v > best) {  // ascending t: the first of equal values stays
      best = v;
      best_index = static_cast<int32_t>(t);
    }
  }
  for (int offset = kWarpSize / 2; offset > 0; offset >>= 1) {
    const float other = __shfl_xor_sync(kFullMask, best, offset);
    const int32_t other_index = __shfl_xor_sync(kFullMask, best_index, offset);
    take_better(&best, &best_index, other, other_index);
  }
  if (lane == 0) {
    scratch->warp_best_value[warp] = best;
    scratch->warp_best_index[warp] = best_index;
  }
  __syncthreads();
  if (warp == 0) {
    float v = lane < n_warps ? scratch->warp_best_value[lane] : -1.0f;
    int32_t i = lane < n_warps ? scratch->warp_best_index[lane] : 0x7fffffff;
    for (int offset = kWarpSize / 2; offset > 0; offset >>= 1) {
      const float other = __shfl_xor_sync(kFullMask, v, offset);
      const int32_t other_index = __shfl_xor_sync(kFullMask, i, offset);
      take_better(&v, &i, other, other_index);
    }
    if (lane == 0) scratch->best_index = i;
  }
  invalid = __syncthreads_or(invalid);
  const int32_t token = scratch->best_index;
  block_sum2(&sum, &unused, scratch);  // its barriers also protect best_index before reuse
  if (invalid != 0) *bad |= kChainBadValue;
  if (!sum_ok(sum)) *bad |= kChainBadSum;
  return token;
}

/// Sampling weight of token t: the residual max(0, p - l·q) or the bonus/fallback weight p.
/// P and Q are row accessors (ProbRowRef, or a fused logits row).
template <bool kResidual, class P, class Q>
__device__ inline uint64_t weight_at(const P& p, const Q& q, float leniency, int64_t t) {
  if constexpr (kResidual) {
    return residual_fixed(p(t), q(t), leniency);
  } else {
    return to_fixed(p(t));
  }
}

/// The single pass over a row: per-chunk fixed-point weight sums into chunk_sums, and the row
/// checks (block-uniform status bits; q is checked for a residual). P and Q are row accessors.
template <bool kResidual, KernelMutant kMutant, class P, class Q>
__device__ uint32_t weight_pass(const P& p, const Q& q, float leniency, int64_t vocab,
                                int64_t n_chunks, uint64_t* chunk_sums, BlockScratch* scratch) {
  const int lane = static_cast<int>(threadIdx.x) % kWarpSize;
  const int warp = static_cast<int>(threadIdx.x) / kWarpSize;
  const int n_warps = static_cast<int>(blockDim.x) / kWarpSize;
  double sum_p = 0.0, sum_q = 0.0;
  int invalid = 0;
  for (int64_t c = warp; c < n_chunks; c += n_warps) {  // warps stride over chunks
    uint64_t w = 0;
    const int64_t first = c * kChunkTokens + lane;
    for (int k = 0; k < kLaneTokens; ++k) {
      const int64_t t = first + static_cast<int64_t>(k) * kWarpSize;
      const bool in_row = kMutant == KernelMutant::kGridStrideOffByOne ? t <= vocab : t < vocab;
      if (in_row) {
        const float pv = p(t);
        invalid |= !valid_probability(pv);
        sum_p += pv;
        if constexpr (kResidual) {
          const float qv = q(t);
          invalid |= !valid_probability(qv);
          sum_q += qv;
          w += residual_fixed(pv, qv, leniency);
        } else {
          w += to_fixed(pv);
        }
      }
    }
    w = warp_sum<kMutant>(w);
    if (lane == 0) chunk_sums[c] = w;
  }
  invalid = __syncthreads_or(invalid);  // also makes chunk_sums visible to the block
  block_sum2(&sum_p, &sum_q, scratch);
  uint32_t status = invalid != 0 ? kChainBadValue : kChainOk;
  if (!sum_ok(sum_p) || (kResidual && !sum_ok(sum_q))) status |= kChainBadSum;
  return status;
}

/// Inverse-CDF sampling over the chunk sums of the last weight_pass: the token whose fixed-point
/// prefix first exceeds fixed_target(bits, total). Sets state->last (or kChainInternal) and
/// returns the total (0: nothing to sample). Block-uniform.
/// `weight(t)` gives token t's fixed-point weight (the same function the chunk sums were made
/// of); `state` has chunk, chunk_base, last and status. Shared by the chain and block kernels.
template <KernelMutant kMutant, class Weight, class State>
__device__ uint64_t locate_by(Weight weight, int64_t vocab, int64_t n_chunks,
                              const uint64_t* chunk_sums, uint32_t bits, BlockScratch* scratch,
                              State* state) {
  const int lane = static_cast<int>(threadIdx.x) % kWarpSize;
  const int64_t per_thread = (n_chunks + blockDim.x - 1) / blockDim.x;
  const int64_t begin = threadIdx.x * per_thread;
  const int64_t end = begin + per_thread < n_chunks ? begin + per_thread : n_chunks;
  uint64_t own = 0;
  for (int64_t c = begin; c < end; ++c) own += chunk_sums[c];
  uint64_t total = 0;
  uint64_t running = block_exclusive_scan<kMutant>(own, scratch, &total);
  if (total == 0) return 0;
  const uint64_t target = fixed_target(bits, total);
  for (int64_t c = begin; c < end; ++c) {
    const uint64_t s = chunk_sums[c];
    if (target >= running && target - running < s) {  // exactly one chunk in the block
      state->chunk = c;
      state->chunk_base = running;
    }
    running += s;
  }
  __syncthreads();
  if (threadIdx.x < kWarpSize) {
    const int64_t c = state->chunk;
    uint64_t cumulative = state->chunk_base;
    int64_t token = -1;
    if (c >= 0) {
      for (int k = 0; k < kLaneTokens; ++k) {
        const int64_t t = c * kChunkTokens + static_cast<int64_t>(k) * kWarpSize + lane;
        const uint64_t w = t < vocab ? weight(t) : 0;
        const uint64_t inclusive = warp_inclusive_scan<kMutant>(w, lane);
        const unsigned hits = __ballot_sync(kFullMask, cumulative + inclusive > target);
        if (hits != 0) {
          token = c * kChunkTokens + static_cast<int64_t>(k) * kWarpSize +
                  __ffs(static_cast<int>(hits)) - 1;
          break;
        }
        cumulative += __shfl_sync(kFullMask, inclusive, kWarpSize - 1);
      }
    }
    if (lane == 0) {
      if (token >= 0 && token < vocab) {
        state->last = static_cast<int32_t>(token);
      } else {
        state->status |= kChainInternal;
      }
    }
  }
  __syncthreads();
  return total;
}

template <bool kResidual, KernelMutant kMutant, class P, class Q>
__device__ uint64_t locate(const P& p, const Q& q, float leniency, int64_t vocab, int64_t n_chunks,
                           const uint64_t* chunk_sums, uint32_t bits, BlockScratch* scratch,
                           RequestState* state) {
  return locate_by<kMutant>([&](int64_t t) { return weight_at<kResidual>(p, q, leniency, t); },
                            vocab, n_chunks, chunk_sums, bits, scratch, state);
}

/// Warp 0's first checks of request r: n_draft in [0, γ] (else 0 drafts) and every draft token in
/// [0, V). Returns the status bits; sets *n_draft. Shared by the chain and block kernels.
__device__ inline uint32_t check_drafts(const int32_t* n_drafts, int64_t r, int64_t g, int64_t v,
                                        const int32_t* tokens, int lane, int64_t* n_draft) {
  uint32_t status = kChainOk;
  int64_t n = n_drafts != nullptr ? n_drafts[r] : g;
  if (n < 0 || n > g) {
    status |= kChainBadDraftCount;
    n = 0;
  }
  int bad_token = 0;
  for (int64_t i = lane; i < n; i += kWarpSize) bad_token |= tokens[i] < 0 || tokens[i] >= v;
  if (__any_sync(kFullMask, bad_token)) status |= kChainBadToken;
  *n_draft = n;
  return status;
}

/// The fields every verifier kernel's argument struct shares apart from the rows (ChainBatch or
/// LogitsBatch), from the host-side batch and output.
template <class Args, class Batch, class Output>
void fill_request_args(Args& args, const Batch& batch, const Output& output) {
  args.draft_tokens = batch.draft_tokens.data();
  args.n_draft = batch.n_draft.empty() ? nullptr : batch.n_draft.data();
  args.request_ids = batch.request_ids.empty() ? nullptr : batch.request_ids.data();
  args.emitted_tokens = output.emitted_tokens.data();
  args.n_accepted = output.n_accepted.data();
  args.accept_mask = output.accept_mask.data();
  args.residual_fallback = output.residual_fallback.data();
  args.status = output.status.data();
  args.gamma = batch.gamma;
  args.vocab = batch.vocab;
  args.n_chunks = (batch.vocab + kChunkTokens - 1) / kChunkTokens;
}

/// fill_request_args and the probability rows.
template <class Args, class Output>
void fill_common_args(Args& args, const ChainBatch& batch, const Output& output) {
  fill_request_args(args, batch, output);
  args.probs_target = batch.probs_target.data();
  args.probs_draft = batch.probs_draft.empty() ? nullptr : batch.probs_draft.data();
}

/// Writes every output entry of request r (so no buffer needs clearing beforehand): the accepted
/// prefix and one token when `status` is ok, otherwise n_accepted = 0 and all tokens -1. `Args`
/// is a kernel's argument struct (emitted_tokens, accept_mask, n_accepted, residual_fallback,
/// status). Shared by the chain and block kernels.
template <class Args>
__device__ void write_request_outputs(const Args& a, int64_t r, int64_t g, const int32_t* tokens,
                                      uint32_t status, int64_t n_if_ok, int32_t last,
                                      uint32_t fallback) {
  const bool ok = status == kChainOk;
  const int64_t n = ok ? n_if_ok : 0;
  for (int64_t i = threadIdx.x; i <= g; i += blockDim.x) {
    a.emitted_tokens[r * (g + 1) + i] = !ok ? -1 : i < n ? tokens[i] : i == n ? last : -1;
  }
  for (int64_t i = threadIdx.x; i < g; i += blockDim.x) {
    a.accept_mask[r * g + i] = ok && i < n ? 1 : 0;
  }
  if (threadIdx.x == 0) {
    a.n_accepted[r] = static_cast<int32_t>(n);
    a.residual_fallback[r] = ok && fallback != 0 ? 1 : 0;
    a.status[r] = status;
  }
}

template <KernelMutant kMutant>
__global__ void __launch_bounds__(1024) verify_chain_kernel(ChainKernelArgs a) {
  SPECLAB_STATIC_SHARED(RequestState, state);
  SPECLAB_DYNAMIC_SHARED(uint64_t, shared);
  BlockScratch* scratch = reinterpret_cast<BlockScratch*>(shared);
  uint64_t* chunk_sums = shared + sizeof(BlockScratch) / sizeof(uint64_t);

  const int64_t r = blockIdx.x;
  const int lane = static_cast<int>(threadIdx.x) % kWarpSize;
  const int64_t g = a.gamma, v = a.vocab;
  const bool greedy = a.method == static_cast<int>(ChainMethod::kGreedy);
  const uint32_t request = a.request_ids != nullptr ? a.request_ids[r] : static_cast<uint32_t>(r);
  const float* target_rows = a.probs_target + r * (g + 1) * v;
  const float* draft_rows = a.probs_draft != nullptr ? a.probs_draft + r * g * v : nullptr;
  const int32_t* tokens = a.draft_tokens + r * g;
  uint64_t seed = 0;
  uint32_t step = 0;
  launch_seed_step(a, &seed, &step);

  // 1. Warp 0: n_draft, the draft tokens, and the V1/V3 accept tests on gathered values.
  if (threadIdx.x < kWarpSize) {
    int64_t n_draft = 0;
    uint32_t status = check_drafts(a.n_draft, r, g, v, tokens, lane, &n_draft);
    int64_t n = n_draft;
    if (!greedy && status == kChainOk) {
      for (int64_t base = 0; base < n_draft; base += kWarpSize) {
        const int64_t i = base + lane;
        int stop = 0, invalid = 0;
        if (i < n_draft) {
          const int32_t x = tokens[i];
          const float pv = target_rows[i * v + x], qv = draft_rows[i * v + x];
          invalid = !valid_gathered(pv) || !valid_gathered(qv);
          const RandomAddress address{
              seed, request, step, static_cast<uint32_t>(i + 1), Purpose::kAcceptTest, 0};
          stop = invalid || !lenient_accepts(philox_uniform(address), a.leniency, qv, pv);
        }
        const unsigned stops = __ballot_sync(kFullMask, stop);
        if (stops != 0) {
          const int first = __ffs(static_cast<int>(stops)) - 1;
          if (__shfl_sync(kFullMask, invalid, first) != 0) status |= kChainBadValue;
          n = base + first;
          break;
        }
      }
    }
    if (lane == 0) {
      state.n_draft = n_draft;
      state.n = n;
      state.chunk = -1;
      state.chunk_base = 0;
      state.status = status;
      state.last = -1;
      state.fallback = 0;
    }
  }
  __syncthreads();

  // 2. The one more token: argmax (V2), or one pass over the residual or bonus row (V1/V3).
  if (state.status == kChainOk) {
    if (greedy) {
      for (int64_t i = 0;; ++i) {
        uint32_t bad = kChainOk;
        const int32_t best = block_argmax_checked(target_rows + i * v, v, scratch, &bad);
        const bool stop = bad != kChainOk || i == state.n_draft || tokens[i] != best;
        if (stop && threadIdx.x == 0) {
          state.status |= bad;
          state.n = i;
          state.last = best;
        }
        if (stop) break;
      }
    } else {
      const int64_t n = state.n;
      const bool bonus = n == state.n_draft;
      const ProbRowRef p{target_rows + n * v};
      const ProbRowRef q{bonus ? nullptr : draft_rows + n * v};
      const RandomAddress address{seed,
                                  request,
                                  step,
                                  static_cast<uint32_t>(n + 1),
                                  bonus ? Purpose::kBonusSample : Purpose::kResidualSample,
                                  0};
      const uint32_t bits = philox_bits(address);
      const uint32_t bad =
          bonus ? weight_pass<false, kMutant>(p, q, a.leniency, v, a.n_chunks, chunk_sums, scratch)
                : weight_pass<true, kMutant>(p, q, a.leniency, v, a.n_chunks, chunk_sums, scratch);
      if (bad != kChainOk) {
        if (threadIdx.x == 0) state.status |= bad;
      } else if (bonus) {
        locate<false, kMutant>(p, q, a.leniency, v, a.n_chunks, chunk_sums, bits, scratch, &state);
      } else if (locate<true, kMutant>(p, q, a.leniency, v, a.n_chunks, chunk_sums, bits, scratch,
                                       &state) == 0) {
        // Rounding left no residual mass although a rejection happened: docs/verifiers.md V1 says
        // sample p (with the residual's uniform) and count the event. Rare, so a second pass is
        // fine.
        weight_pass<false, kMutant>(p, q, a.leniency, v, a.n_chunks, chunk_sums, scratch);
        locate<false, kMutant>(p, q, a.leniency, v, a.n_chunks, chunk_sums, bits, scratch, &state);
        if (threadIdx.x == 0) state.fallback = 1;
      }
    }
  }
  __syncthreads();

  // 3. Outputs.
  write_request_outputs(a, r, g, tokens, state.status, state.n, state.last, state.fallback);
}

/// Host-side checks of shapes and parameters (throws InvalidInput, as core does).
void check_chain_launch(const ChainBatch& batch, const ChainParams& params,
                        const ChainDeviceOutput& output);

/// Threads per block for a vocabulary: about 16 tokens per thread, whole warps, 32..1024.
inline int chain_block_threads(int64_t vocab) {
  const int64_t wanted = (vocab + 15) / 16;
  const int64_t warps = (wanted + kWarpSize - 1) / kWarpSize;
  return static_cast<int>(warps < 1 ? 1 : warps > 32 ? 32 : warps) * kWarpSize;
}

template <KernelMutant kMutant>
cudaError_t launch_verify_chain(const ChainBatch& batch, const ChainParams& params,
                                const ChainDeviceOutput& output, cudaStream_t stream,
                                const DeviceSeedStep* seed_step = nullptr) {
  check_chain_launch(batch, params, output);
  ChainKernelArgs args{};
  fill_common_args(args, batch, output);
  args.method = static_cast<int>(params.method);
  args.leniency =
      params.method == ChainMethod::kLenient ? static_cast<float>(params.leniency) : 1.0f;
  args.seed = params.seed;
  args.step = params.step;
  args.seed_step = seed_step;
  const size_t shared_bytes =
      sizeof(BlockScratch) + static_cast<size_t>(args.n_chunks) * sizeof(uint64_t);
  if (shared_bytes > 48 * 1024) {
    const cudaError_t status = cudaFuncSetAttribute(verify_chain_kernel<kMutant>,
                                                    cudaFuncAttributeMaxDynamicSharedMemorySize,
                                                    static_cast<int>(shared_bytes));
    if (status != cudaSuccess) return status;
  }
  return launch_kernel(verify_chain_kernel<kMutant>, dim3(static_cast<unsigned>(batch.batch)),
                       dim3(static_cast<unsigned>(chain_block_threads(batch.vocab))), shared_bytes,
                       stream, args);
}

}  // namespace speclab::gpu::detail
