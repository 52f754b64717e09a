// Chain verifier kernels V1-V3 (docs/verifiers.md), one CTA per request, following
// core/verify/verify_chain_fast: the accept tests in warp 0, then one row pass and the exact
// locate (gpu/sampling/row_sampler.cuh). Algorithm, splits and bytes read: gpu/README.md
// "gpu::verify_chain"; why the tokens are core's: proofs/gpu_kernels.md.
#pragma once

#include <cstdint>
#include <type_traits>

#include "core/base/philox.hpp"
#include "core/base/rules.hpp"
#include "core/verify/verify_chain.hpp"
#include "gpu/base/device.cuh"
#include "gpu/base/reduce.cuh"
#include "gpu/base/simt.cuh"
#include "gpu/sampling/row_sampler.cuh"
#include "gpu/verify/verify_chain.hpp"

namespace speclab::gpu::detail {

/// The kernel arguments every verifier shares (chain and block, probabilities and logits): a
/// request's drafts and ids, its outputs, the shapes and the seed. Each kernel's argument struct
/// adds its rows and method; passed by value, pointers are device memory. fill_request_args fills
/// it from the host-side batch and output.
struct RequestIo {
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
  uint64_t seed;
  uint32_t step;
  const DeviceSeedStep* seed_step;  // when set, seed and step are read from it
};

/// The chain kernels on probabilities.
struct ChainKernelArgs : RequestIo {
  const float* probs_target;  // [B, γ+1, V]
  const float* probs_draft;   // [B, γ, V] or null (V2)
  int64_t batch;   // B: verify_chain_kernel's CTAs take requests blockIdx.x + k·gridDim.x
  int method;      // ChainMethod
  float leniency;  // 1 for V1
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

// A request's state after its accept tests: n of its n_draft draft tokens accepted, nothing of
// the sampled row located yet.
__device__ inline void start_request_state(RequestState* state, int64_t n_draft, int64_t n,
                                           uint32_t status) {
  state->n_draft = n_draft;
  state->n = n;
  state->chunk = -1;
  state->chunk_base = 0;
  state->status = status;
  state->last = -1;
  state->fallback = 0;
}

/// Argmax of one row with the lowest id on ties, fused with the row checks. Returns the token;
/// *bad is set (block-uniform) when a value is NaN/inf/negative or the row sum is off.
__device__ inline int32_t block_argmax_checked(const float* row, int64_t vocab,
                                               BlockScratch* scratch, uint32_t* bad) {
  Argmax best{-1.0f, 0x7fffffff};  // below every valid probability
  double sum = 0.0, unused = 0.0;
  int invalid = 0;
  for (int64_t t = threadIdx.x; t < vocab; t += blockDim.x) {  // grid-stride over the row
    const float v = row[t];
    invalid |= !valid_probability(v);
    sum += v;
    if (v > best.value) best = {v, static_cast<int32_t>(t)};  // ascending t: the first stays
  }
  best = block_best(best, Argmax{-1.0f, 0x7fffffff}, scratch->warp_best);
  if (threadIdx.x == 0) scratch->best_index = best.index;
  invalid = __syncthreads_or(invalid);
  const int32_t token = scratch->best_index;
  block_sum2(&sum, &unused, scratch);  // its barriers also protect best_index before reuse
  if (invalid != 0) *bad |= kChainBadValue;
  if (!sum_ok(sum)) *bad |= kChainBadSum;
  return token;
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

/// The RequestIo of a launch, from the host-side batch (ChainBatch or LogitsBatch) and output;
/// seed, step and seed_step are the launcher's.
template <class Batch, class Output>
void fill_request_args(RequestIo& args, const Batch& batch, const Output& output) {
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

/// A launch's seed and step: the params', or, when `seed_step` (device memory) is set, the word
/// the kernel reads at run time (launch_seed_step).
inline void set_launch_seed(RequestIo& args, uint64_t seed, uint32_t step,
                            const DeviceSeedStep* seed_step) {
  args.seed = seed;
  args.step = step;
  args.seed_step = seed_step;
}

/// A chain launch's method, leniency (1 but for V3) and seed: ChainKernelArgs and
/// LogitsChainKernelArgs alike.
template <class Args>
void set_chain_params(Args& args, const ChainParams& params, const DeviceSeedStep* seed_step) {
  args.method = static_cast<int>(params.method);
  args.leniency =
      params.method == ChainMethod::kLenient ? static_cast<float>(params.leniency) : 1.0f;
  set_launch_seed(args, params.seed, params.step, seed_step);
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

/// The rows and random-number address of request r of a probability launch.
struct ChainRequest {
  int64_t r;
  uint32_t request;  // its id (Philox address)
  uint64_t seed;
  uint32_t step;
  const float* target_rows;  // [γ+1, V]
  const float* draft_rows;   // [γ, V] or null
  const int32_t* tokens;     // [γ]
};

__device__ inline ChainRequest chain_request(const ChainKernelArgs& a, int64_t r) {
  ChainRequest q{};
  q.r = r;
  q.request = a.request_ids != nullptr ? a.request_ids[r] : static_cast<uint32_t>(r);
  launch_seed_step(a, &q.seed, &q.step);
  q.target_rows = a.probs_target + r * (a.gamma + 1) * a.vocab;
  q.draft_rows = a.probs_draft != nullptr ? a.probs_draft + r * a.gamma * a.vocab : nullptr;
  q.tokens = a.draft_tokens + r * a.gamma;
  return q;
}

/// Step 1, warp 0: n_draft, the draft tokens, and the V1/V3 accept tests on gathered values (32
/// positions per ballot); initialises *state. The caller synchronises.
__device__ inline void chain_accept_phase(const ChainKernelArgs& a, const ChainRequest& q,
                                          bool greedy, RequestState* state) {
  if (threadIdx.x >= kWarpSize) return;
  const int lane = static_cast<int>(threadIdx.x);
  const int64_t v = a.vocab;
  int64_t n_draft = 0;
  uint32_t status = check_drafts(a.n_draft, q.r, a.gamma, v, q.tokens, lane, &n_draft);
  int64_t n = n_draft;
  if (!greedy && status == kChainOk) {
    for (int64_t base = 0; base < n_draft; base += kWarpSize) {
      const int64_t i = base + lane;
      int stop = 0, invalid = 0, impossible = 0;
      if (i < n_draft) {
        const int32_t x = q.tokens[i];
        const float pv = q.target_rows[i * v + x], qv = q.draft_rows[i * v + x];
        invalid = !valid_gathered(pv) || !valid_gathered(qv);
        impossible = !invalid && !drafted_from(qv);
        const RandomAddress address{
            q.seed, q.request, q.step, static_cast<uint32_t>(i + 1), Purpose::kAcceptTest, 0};
        stop =
            invalid || impossible || !lenient_accepts(philox_uniform(address), a.leniency, qv, pv);
      }
      const unsigned stops = __ballot_sync(kFullMask, stop);
      if (stops != 0) {
        const int first = __ffs(static_cast<int>(stops)) - 1;
        if (__shfl_sync(kFullMask, invalid, first) != 0) status |= kChainBadValue;
        if (__shfl_sync(kFullMask, impossible, first) != 0) status |= kChainImpossibleDraft;
        n = base + first;
        break;
      }
    }
  }
  if (lane == 0) start_request_state(state, n_draft, n, status);
}

/// The row V1/V3 samples the one more token from after the accept phase: the bonus row p_{n+1}
/// (every draft accepted) or the residual max(0, p_{n+1} − l·q_{n+1}), and its uniform's bits.
struct SampledRow {
  bool bonus;
  ProbRowRef p, q;
  uint32_t bits;
};

__device__ inline SampledRow sampled_row(const ChainKernelArgs& a, const ChainRequest& req,
                                         const RequestState& state) {
  const int64_t n = state.n, v = a.vocab;
  SampledRow row{};
  row.bonus = n == state.n_draft;
  row.p = ProbRowRef{req.target_rows + n * v};
  row.q = ProbRowRef{row.bonus ? nullptr : req.draft_rows + n * v};
  const RandomAddress address{req.seed,
                              req.request,
                              req.step,
                              static_cast<uint32_t>(n + 1),
                              row.bonus ? Purpose::kBonusSample : Purpose::kResidualSample,
                              0};
  row.bits = philox_bits(address);
  return row;
}

/// Step 3 of V1/V3 once every chunk sum of the sampled row (bonus row p, or the residual of p and
/// q; row accessors) is in chunk_sums and its checks have passed: locate the token; when a
/// rejection left no residual mass (rounding), docs/verifiers.md V1 says sample p with the
/// residual's uniform and count the event (a second pass, rare).
template <KernelMutant kMutant, class P, class Q>
__device__ void sampled_locate(bool bonus, const P& p, const Q& q, uint32_t bits, float leniency,
                               int64_t vocab, int64_t n_chunks, uint64_t* chunk_sums,
                               BlockScratch* scratch, RequestState* state) {
  if (bonus) {
    locate<false, kMutant>(p, q, leniency, vocab, n_chunks, chunk_sums, bits, scratch, state);
  } else if (locate<true, kMutant>(p, q, leniency, vocab, n_chunks, chunk_sums, bits, scratch,
                                   state) == 0) {
    weight_pass<false, kMutant>(p, q, leniency, vocab, n_chunks, chunk_sums, scratch);
    locate<false, kMutant>(p, q, leniency, vocab, n_chunks, chunk_sums, bits, scratch, state);
    if (threadIdx.x == 0) state->fallback = 1;
  }
}

template <KernelMutant kMutant>
__device__ void chain_locate(const ChainKernelArgs& a, const SampledRow& row, uint64_t* chunk_sums,
                             BlockScratch* scratch, RequestState* state) {
  sampled_locate<kMutant>(row.bonus, row.p, row.q, row.bits, a.leniency, a.vocab, a.n_chunks,
                          chunk_sums, scratch, state);
}

/// One request r of verify_chain_kernel (the whole block). Ends with the outputs written; the
/// caller synchronises before the block's shared memory is reused.
template <KernelMutant kMutant>
__device__ void verify_chain_request(const ChainKernelArgs& a, int64_t r, RequestState& state,
                                     BlockScratch* scratch, uint64_t* chunk_sums) {
  const int64_t g = a.gamma, v = a.vocab;
  const bool greedy = a.method == static_cast<int>(ChainMethod::kGreedy);
  const ChainRequest req = chain_request(a, r);
  // 1. Warp 0: n_draft, the draft tokens, and the V1/V3 accept tests on gathered values.
  chain_accept_phase(a, req, greedy, &state);
  __syncthreads();

  // 2. The one more token: argmax (V2), or one pass over the residual or bonus row (V1/V3).
  if (state.status == kChainOk) {
    if (greedy) {
      for (int64_t i = 0;; ++i) {
        uint32_t bad = kChainOk;
        const int32_t best = block_argmax_checked(req.target_rows + i * v, v, scratch, &bad);
        const bool stop = bad != kChainOk || i == state.n_draft || req.tokens[i] != best;
        if (stop && threadIdx.x == 0) {
          state.status |= bad;
          state.n = i;
          state.last = best;
        }
        if (stop) break;
      }
    } else {
      const SampledRow row = sampled_row(a, req, state);
      const uint32_t bad = row.bonus ? weight_pass<false, kMutant>(row.p, row.q, a.leniency, v,
                                                                   a.n_chunks, chunk_sums, scratch)
                                     : weight_pass<true, kMutant>(row.p, row.q, a.leniency, v,
                                                                  a.n_chunks, chunk_sums, scratch);
      if (bad != kChainOk) {
        if (threadIdx.x == 0) state.status |= bad;
      } else {
        chain_locate<kMutant>(a, row, chunk_sums, scratch, &state);
      }
    }
  }
  __syncthreads();

  // 3. Outputs.
  write_request_outputs(a, r, g, req.tokens, state.status, state.n, state.last, state.fallback);
}

/// One CTA per request, or at large batches a persistent grid: CTA b verifies requests b,
/// b + gridDim.x, … one after another (the launcher picks the grid; the tokens do not depend on
/// it).
template <KernelMutant kMutant>
__global__ void __launch_bounds__(1024) verify_chain_kernel(ChainKernelArgs a) {
  SPECLAB_STATIC_SHARED(RequestState, state);
  SPECLAB_DYNAMIC_SHARED(uint64_t, shared);
  BlockScratch* scratch = reinterpret_cast<BlockScratch*>(shared);
  uint64_t* chunk_sums = shared + sizeof(BlockScratch) / sizeof(uint64_t);
  for (int64_t r = blockIdx.x; r < a.batch; r += gridDim.x) {
    verify_chain_request<kMutant>(a, r, state, scratch, chunk_sums);
    __syncthreads();  // every thread is done with the request's shared state
  }
}

/// One slice's share of a split row's checks (SplitArgs), and (V5) of its Z_i.
struct SlicePartial {
  double sum_p;
  double sum_q;
  double z;  // V5's Σ max(0, w_i·p − q) over the slice; 0 for V1/V3
  uint32_t invalid;
  uint32_t reserved;
};

/// One row's V2 result in a row-parallel launch: its checked argmax.
struct RowArgmax {
  int32_t token;
  uint32_t bad;  // ChainStatus bits of the row's checks
};

/// Bytes of one logits row's statistics in a workspace (RowStatsSlot,
/// gpu/sampling/fused_logits.cuh).
inline constexpr size_t kRowStatsSlotBytes = 32;

/// Where a split launch keeps its per-request data in the ChainWorkspace (layout:
/// split_layout): arrival counters first, so a zeroed workspace is a ready one. V1/V3 split one
/// row per request and use the first B·S partials and B·n_chunks chunk sums; V5 splits each of the
/// request's γ+1 rows.
struct SplitArgs {
  uint32_t* arrivals;        // [B] CTAs done; 0 between launches
  SlicePartial* partials;    // V1/V3 [B, S]; V5 [B, γ+1, S]
  uint64_t* chunk_sums;      // V1/V3 [B, n_chunks]; V5 [B, γ+1, n_chunks]
  RowArgmax* rows;           // [B, γ+1] (V2)
  unsigned char* row_stats;  // [B, 2γ+1] of kRowStatsSlotBytes (logits rows in parallel)
  int slices;                // S ≥ 2 (V2: γ+1, one CTA per row)
  int64_t slice_chunks;      // ⌈n_chunks / S⌉
};

/// Chunks [*begin, *end) of slice s of a split row.
__device__ inline void slice_chunk_range(const SplitArgs& w, int64_t n_chunks, int s,
                                         int64_t* begin, int64_t* end) {
  *begin = s * w.slice_chunks;
  *end = *begin + w.slice_chunks < n_chunks ? *begin + w.slice_chunks : n_chunks;
}

/// A split row's checks (and Z) from its S slice partials, reduced by warp 0 in a fixed order —
/// lane k adds slices k, k + 32, … in turn, then a butterfly over the lanes — so the result does
/// not depend on which slice arrived last and no thread walks S partials alone. The whole of
/// warp 0 calls; every lane gets the total.
__device__ inline SlicePartial warp_reduce_slice_partials(const SlicePartial* partials,
                                                          int slices) {
  const int lane = static_cast<int>(threadIdx.x) % kWarpSize;
  // One field at a time (warp_sum_double), which keeps few values live: the 1024-thread kernels
  // that call this have 64 registers.
  const auto field_sum = [&](double SlicePartial::*field) {
    double sum = 0.0;
    for (int k = lane; k < slices; k += kWarpSize) sum += load_coherent(&(partials[k].*field));
    return warp_sum_double(sum);
  };
  SlicePartial total{};
  total.sum_p = field_sum(&SlicePartial::sum_p);
  total.sum_q = field_sum(&SlicePartial::sum_q);
  total.z = field_sum(&SlicePartial::z);
  int invalid = 0;
  for (int k = lane; k < slices; k += kWarpSize)
    invalid |= load_coherent(&partials[k].invalid) != 0;
  total.invalid = __any_sync(kFullMask, invalid) ? 1u : 0u;
  return total;
}

/// Copies a split row's chunk sums from the workspace into shared memory (the caller
/// synchronises before reading them).
__device__ inline void load_chunk_sums(uint64_t* shared_sums, const uint64_t* sums,
                                       int64_t n_chunks) {
  for (int64_t c = threadIdx.x; c < n_chunks; c += blockDim.x) {
    shared_sums[c] = load_coherent(sums + c);
  }
}

/// Steps 2-3 of slice s of a split V1/V3 request r once its accept phase has left the status in
/// *state: the slice's chunks of the sampled row (bonus row p, or the residual of p and q: row
/// accessors) into the workspace, its row-check partials, the arrival; in the last slice the
/// partials reduced by warp 0 in a fixed order, the chunk sums copied to shared memory and the
/// locate (and the rare fallback). Returns (block-uniform) whether this CTA is the last, which then
/// writes the outputs. Shared by the kernels on probabilities and on logits.
template <KernelMutant kMutant, class P, class Q>
__device__ bool split_sampled_row(bool bonus, const P& p, const Q& q, uint32_t bits, float leniency,
                                  int64_t vocab, int64_t n_chunks, const SplitArgs& w, int64_t r,
                                  int s, uint64_t* chunk_sums, BlockScratch* scratch,
                                  RequestState* state, int32_t* last_flag) {
  uint64_t* request_chunks = w.chunk_sums + r * n_chunks;
  const bool ok = state->status == kChainOk;  // block-uniform
  LaneRowChecks checks;
  if (ok) {
    int64_t begin = 0, end = 0;
    slice_chunk_range(w, n_chunks, s, &begin, &end);
    if (bonus) {
      chunk_range_pass<false, kMutant>(p, q, leniency, vocab, begin, end, request_chunks, &checks);
    } else {
      chunk_range_pass<true, kMutant>(p, q, leniency, vocab, begin, end, request_chunks, &checks);
    }
  }
  checks.invalid = __syncthreads_or(checks.invalid);
  block_sum2(&checks.sum_p, &checks.sum_q, scratch);
  const bool last = split_arrive(&w.arrivals[r], static_cast<uint32_t>(w.slices), last_flag, [&] {
    SlicePartial& partial = w.partials[r * w.slices + s];
    partial.sum_p = checks.sum_p;
    partial.sum_q = checks.sum_q;
    partial.z = 0.0;
    partial.invalid = static_cast<uint32_t>(checks.invalid);
  });
  if (!last) return false;  // block-uniform

  // The last slice: every other slice's writes are visible.
  if (ok) {
    if (threadIdx.x < kWarpSize) {
      const SlicePartial total = warp_reduce_slice_partials(w.partials + r * w.slices, w.slices);
      const int invalid = static_cast<int>(total.invalid);
      if (threadIdx.x == 0) {
        state->status |= bonus ? row_check_status<false>(invalid, total.sum_p, total.sum_q)
                               : row_check_status<true>(invalid, total.sum_p, total.sum_q);
      }
    }
    load_chunk_sums(chunk_sums, request_chunks, n_chunks);
    __syncthreads();
    if (state->status == kChainOk) {
      sampled_locate<kMutant>(bonus, p, q, bits, leniency, vocab, n_chunks, chunk_sums, scratch,
                              state);
    }
  }
  __syncthreads();
  return true;
}

/// V1/V3 on probabilities with each request's vocabulary split over S CTAs (blockIdx.x = r·S + s):
///  1. every slice runs the accept phase itself (γ gathers: cheaper than waiting for one);
///  2. slice s streams chunks [s·C, (s+1)·C) of the sampled row, writing their exact fixed-point
///     sums to the workspace and its row-check partials;
///  3. the last slice to arrive (an atomic counter after a fence, which it resets) adds the
///     partials (warp 0, a fixed order), copies the chunk sums to shared memory and runs the
///     one-CTA locate (and the rare fallback pass), then writes the outputs.
/// Integer chunk sums make the token independent of S and of which slice arrives last.
template <KernelMutant kMutant>
__global__ void __launch_bounds__(1024) verify_chain_split_kernel(ChainKernelArgs a, SplitArgs w) {
  SPECLAB_STATIC_SHARED(RequestState, state);
  SPECLAB_STATIC_SHARED(int32_t, last_slice);
  SPECLAB_DYNAMIC_SHARED(uint64_t, shared);
  BlockScratch* scratch = reinterpret_cast<BlockScratch*>(shared);
  uint64_t* chunk_sums = shared + sizeof(BlockScratch) / sizeof(uint64_t);

  const int64_t r = blockIdx.x / w.slices;
  const int s = static_cast<int>(blockIdx.x % w.slices);
  const ChainRequest req = chain_request(a, r);
  chain_accept_phase(a, req, false, &state);
  __syncthreads();

  const SampledRow row = sampled_row(a, req, state);
  if (!split_sampled_row<kMutant>(row.bonus, row.p, row.q, row.bits, a.leniency, a.vocab,
                                  a.n_chunks, w, r, s, chunk_sums, scratch, &state, &last_slice)) {
    return;  // block-uniform
  }
  write_request_outputs(a, r, a.gamma, req.tokens, state.status, state.n, state.last,
                        state.fallback);
}

/// V2 on probabilities with the rows of a request reduced in parallel, one CTA per (request r,
/// row i) (blockIdx.x = r·(γ+1) + i), for batches too small to fill the device: each CTA runs
/// warp 0's checks, reduces row i ≤ γ_b (the checked block argmax, lowest id on ties) into the
/// workspace and counts itself in; the last CTA of the request to arrive walks the rows in order
/// and stops where the sequential kernel stops — the first bad row, the first draft that is not
/// its row's argmax, or row γ_b — so the outputs are the sequential kernel's (rows past the stop
/// are read but their checks ignored, as the sequential kernel never reads them).
template <KernelMutant kMutant>
__global__ void __launch_bounds__(1024)
    verify_chain_greedy_rows_kernel(ChainKernelArgs a, SplitArgs w) {
  SPECLAB_STATIC_SHARED(RequestState, state);
  SPECLAB_STATIC_SHARED(int32_t, last_row);
  SPECLAB_DYNAMIC_SHARED(uint64_t, shared);
  BlockScratch* scratch = reinterpret_cast<BlockScratch*>(shared);
  const int64_t g = a.gamma, v = a.vocab;
  const int64_t r = blockIdx.x / (g + 1);
  const int64_t i = blockIdx.x % (g + 1);
  const ChainRequest req = chain_request(a, r);
  chain_accept_phase(a, req, true, &state);
  __syncthreads();
  RowArgmax* rows = w.rows + r * (g + 1);
  if (state.status == kChainOk && i <= state.n_draft) {  // block-uniform
    uint32_t bad = kChainOk;
    const int32_t best = block_argmax_checked(req.target_rows + i * v, v, scratch, &bad);
    if (threadIdx.x == 0) {
      rows[i].token = best;
      rows[i].bad = bad;
    }
  }
  if (!split_arrive(&w.arrivals[r], static_cast<uint32_t>(g + 1), &last_row, [] {})) return;
  if (threadIdx.x == 0) {
    if (state.status == kChainOk) {
      for (int64_t k = 0;; ++k) {
        const int32_t best = load_coherent(&rows[k].token);
        const uint32_t bad = load_coherent(&rows[k].bad);
        if (bad != kChainOk || k == state.n_draft || req.tokens[k] != best) {
          state.status |= bad;
          state.n = k;
          state.last = best;
          break;
        }
      }
    }
  }
  __syncthreads();
  write_request_outputs(a, r, g, req.tokens, state.status, state.n, state.last, state.fallback);
}

/// Host-side checks of shapes and parameters (throws InvalidInput, as core does).
void check_chain_launch(const ChainBatch& batch, const ChainParams& params,
                        const ChainDeviceOutput& output);

/// The workspace layout of a split launch of B requests, S slices, n_chunks chunks (byte
/// offsets of SplitArgs' arrays, and the total): room for every one of a request's γ+1 rows to be
/// split (V5), of which V1/V3 use the first B rows' worth.
struct SplitLayout {
  size_t partials, chunk_sums, rows, row_stats, bytes;
};

inline SplitLayout split_layout(int64_t batch, int64_t gamma, int64_t slices, int64_t n_chunks) {
  SplitLayout layout{};
  const size_t arrivals = static_cast<size_t>(batch) * sizeof(uint32_t);
  const int64_t split_rows = batch * (gamma + 1);
  layout.partials = (arrivals + 15) / 16 * 16;
  layout.chunk_sums =
      layout.partials + static_cast<size_t>(split_rows * slices) * sizeof(SlicePartial);
  layout.rows = layout.chunk_sums + static_cast<size_t>(split_rows * n_chunks) * sizeof(uint64_t);
  layout.row_stats =
      (layout.rows + static_cast<size_t>(split_rows) * sizeof(RowArgmax) + 15) / 16 * 16;
  layout.bytes =
      layout.row_stats + static_cast<size_t>(batch * (2 * gamma + 1)) * kRowStatsSlotBytes;
  return layout;
}

/// The SplitArgs of a launch on `workspace` (laid out as chain_workspace_bytes sized it: room for
/// the most slices V allows) with S = slices.
SplitArgs split_args(const ChainWorkspace& workspace, int64_t batch, int64_t gamma, int64_t vocab,
                     int slices);

/// Threads of a CTA of a vocabulary split: warps stride over a slice's chunks, one warp per chunk,
/// at least 4 warps (the locate) and at most 32.
inline int split_block_threads(int64_t slice_chunks) {
  const int64_t warps = slice_chunks < 4 ? 4 : slice_chunks > 32 ? 32 : slice_chunks;
  return static_cast<int>(warps) * kWarpSize;
}

/// Slices per request of a vocabulary split (V1/V3, V5) of a batch of B requests on a workspace of
/// at least chain_workspace_bytes (else InvalidInput): workspace.slices, or for 0 ⌈2·SMs / B⌉
/// (1 once B fills the device), at most chain_max_slices(V). `multiprocessors` is the device's SM
/// count. Throws InvalidInput for a forced count out of range.
int vocab_split_slices(int64_t batch, int64_t gamma, int64_t vocab, const ChainWorkspace& workspace,
                       int multiprocessors);

/// Whether a launch on `workspace` (at least chain_workspace_bytes, else InvalidInput) reduces a
/// request's rows in parallel, one CTA per row, instead of one after another in one CTA: forced by
/// workspace.slices ≥ 2, automatic (0) when the batch leaves SMs idle (B < SMs); never for γ = 0.
/// V2 on probabilities, and the logits verifiers' row statistics.
bool rows_in_parallel(int64_t batch, int64_t gamma, int64_t vocab, const ChainWorkspace& workspace,
                      int multiprocessors);

/// CTAs per request of a launch: 1 unless the workspace allows splitting (a workspace of
/// chain_workspace_bytes): V1/V3 slices of the vocabulary (vocab_split_slices), V2 γ+1 (one per
/// row); `multiprocessors` is the device's SM count. Throws InvalidInput for a forced count out of
/// range or a workspace too small.
int chain_launch_slices(const ChainBatch& batch, const ChainParams& params,
                        const ChainWorkspace& workspace, int multiprocessors);

/// The device's multiprocessor count (the emulation stands for an H200's 132).
int device_multiprocessors();

/// verify_chain_kernel's launch shape: one CTA of row_block_threads(V) threads per request, or
/// for V1/V3 once the batch fills the device (B ≥ SMs) a persistent grid of at most two CTAs per SM
/// of at most 512 threads, each looping over requests (two resident per SM, so one's row pass
/// overlaps the other's accept phase and locate).
struct ChainGrid {
  int64_t ctas;
  int threads;
};

inline ChainGrid chain_grid(int64_t batch, int64_t vocab, bool greedy, int multiprocessors) {
  const int threads = row_block_threads(vocab);
  if (greedy || batch < multiprocessors) return {batch, threads};
  const int64_t persistent = 2 * static_cast<int64_t>(multiprocessors);
  return {batch < persistent ? batch : persistent, threads < 512 ? threads : 512};
}

template <KernelMutant kMutant>
cudaError_t launch_verify_chain(const ChainBatch& batch, const ChainParams& params,
                                const ChainDeviceOutput& output, cudaStream_t stream,
                                const DeviceSeedStep* seed_step = nullptr) {
  check_chain_launch(batch, params, output);
  ChainKernelArgs args{};
  fill_common_args(args, batch, output);
  args.batch = batch.batch;
  set_chain_params(args, params, seed_step);
  const size_t shared_bytes =
      sizeof(BlockScratch) + static_cast<size_t>(args.n_chunks) * sizeof(uint64_t);
  const int slices =
      output.workspace.bytes.empty()
          ? 1
          : chain_launch_slices(batch, params, output.workspace, device_multiprocessors());
  if (slices > 1) {
    const bool greedy = params.method == ChainMethod::kGreedy;
    auto kernel =
        greedy ? verify_chain_greedy_rows_kernel<kMutant> : verify_chain_split_kernel<kMutant>;
    if (shared_bytes > 48 * 1024) {
      const cudaError_t status = cudaFuncSetAttribute(
          kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(shared_bytes));
      if (status != cudaSuccess) return status;
    }
    const SplitArgs split =
        split_args(output.workspace, batch.batch, batch.gamma, batch.vocab, slices);
    const int threads =
        greedy ? row_block_threads(batch.vocab) : split_block_threads(split.slice_chunks);
    return launch_kernel(kernel, dim3(static_cast<unsigned>(batch.batch * slices)),
                         dim3(static_cast<unsigned>(threads)), shared_bytes, stream, args, split);
  }
  if (shared_bytes > 48 * 1024) {
    const cudaError_t status = cudaFuncSetAttribute(verify_chain_kernel<kMutant>,
                                                    cudaFuncAttributeMaxDynamicSharedMemorySize,
                                                    static_cast<int>(shared_bytes));
    if (status != cudaSuccess) return status;
  }
  const ChainGrid grid = chain_grid(batch.batch, batch.vocab, params.method == ChainMethod::kGreedy,
                                    device_multiprocessors());
  return launch_kernel(verify_chain_kernel<kMutant>, dim3(static_cast<unsigned>(grid.ctas)),
                       dim3(static_cast<unsigned>(grid.threads)), shared_bytes, stream, args);
}

}  // namespace speclab::gpu::detail
