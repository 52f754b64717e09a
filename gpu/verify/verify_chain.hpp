// Chain verifiers V1-V3 of docs/verifiers.md on the device: the same ChainBatch/ChainParams as core
// and the same Philox addressing, so gpu::verify_chain and core::verify_chain_reference return the
// same tokens for the same inputs. One CTA per request; algorithm and bytes read in gpu/README.md.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>
#include <span>

#include "core/verify/verify_chain.hpp"
#include "gpu/base/device_types.hpp"
#include "gpu/sampling/logits.hpp"

namespace speclab::gpu {

/// Device scratch that lets the verifiers spread a request over several CTAs when the batch is too
/// small to fill the device: on probabilities V1/V3 split each request's vocabulary into "slices",
/// V5 (gpu::verify_block) splits each row it needs the same way, V2 reduces the request's γ+1 rows
/// at once (one CTA per row); on logits every verifier reduces the rows' statistics by parallel
/// CTAs, and V1/V3 also split the sampled row into slices (a second launch). `bytes`: at least
/// chain_workspace_bytes(B, γ, V) of device memory, zeroed once (cudaMemset) before its first use;
/// every launch leaves it zeroed again (its arrival counters), so it can be reused by the next
/// launch on the same stream and by a replayed graph. `slices`: 0 picks ⌈2·SMs / B⌉ (at most one
/// slice per kAutoSliceChunks chunks; 1 when B fills the device; V2 and the logits statistics:
/// rows in parallel when B < SMs), 1 keeps one CTA per request, S ≥ 2 forces S slices (up to
/// chain_max_slices(V); V2 and the logits statistics: rows in parallel). The tokens never depend on
/// the split: the slices write exact integer chunk sums, which the last slice to finish reduces in
/// chunk order; V2's last row CTA walks the rows in order and stops where the one-CTA kernel stops.
struct ChainWorkspace {
  std::span<std::byte> bytes;  ///< empty: one CTA per request
  int slices = 0;
};

/// Chunks of 256 tokens each slice of a split request covers at least (a forced S).
inline constexpr int64_t kMinSliceChunks = 4;
/// Chunks each slice covers at least when the launcher picks S itself: fewer, larger slices
/// (at most 31 at V = 128256, 7 at V = 32000) than a forced S may use, so every slice streams
/// 4096 tokens or more and the last CTA reduces few partials.
inline constexpr int64_t kAutoSliceChunks = 16;

/// The most slices a request of vocabulary V is split into (1 when V < 2·4·256 tokens).
int chain_max_slices(int64_t vocab);

/// Bytes of ChainWorkspace::bytes for a batch of B requests of γ drafts and vocabulary V (any
/// slice count).
size_t chain_workspace_bytes(int64_t batch, int64_t gamma, int64_t vocab);

/// Device buffers the kernel writes; every entry of every request is written.
struct ChainDeviceOutput {
  std::span<int32_t> emitted_tokens;  ///< [B, γ+1] accepted prefix + one token, then -1
  std::span<int32_t> n_accepted;      ///< [B]
  std::span<uint8_t> accept_mask;     ///< [B, γ]
  std::span<uint8_t>
      residual_fallback;          ///< [B] 1 where the residual had zero mass (docs/verifiers.md V1)
  std::span<uint32_t> status;     ///< [B] ChainStatus bits
  ChainWorkspace workspace = {};  ///< optional: splitting at small batches (see ChainWorkspace)
};

/// A ChainBatch whose probabilities are given as logits: p_i = core::probs_from_logits(target
/// logits row i, T_target) and q_i likewise with the draft's format and temperature
/// (docs/verifiers.md sampling pipeline without filters: top_k = 0, top_p = 1, min_p = 0). The
/// softmax is fused into the verifier kernels; no probability array exists. Token and bookkeeping
/// spans as ChainBatch.
struct LogitsBatch {
  int64_t batch = 0;                      ///< B ≥ 1
  int64_t gamma = 0;                      ///< γ ≥ 0
  int64_t vocab = 0;                      ///< V ≥ 1
  DeviceLogits target;                    ///< [B, γ+1, V]
  DeviceLogits draft;                     ///< [B, γ, V]; data may be empty for kGreedy
  std::span<const int32_t> draft_tokens;  ///< [B, γ]
  std::span<const int32_t> n_draft;       ///< [B] or empty (all γ)
  std::span<const uint32_t> request_ids;  ///< [B] or empty (0..B-1)
};

/// Verifies a batch on `stream`. Every pointer in `batch` and `output` is device memory (their
/// sizes are checked on the host; their values are validated by the kernel, per request, in the
/// rows it reads: see `status`). Throws InvalidInput for bad shapes or parameters, as core does;
/// returns the launch status and never synchronises.
cudaError_t verify_chain(const ChainBatch& batch, const ChainParams& params,
                         const ChainDeviceOutput& output, cudaStream_t stream);

/// As above; when `seed_step` (device memory) is not null the kernel reads seed and step from it
/// and params.seed/params.step are ignored (CUDA graphs, see DeviceSeedStep).
cudaError_t verify_chain(const ChainBatch& batch, const ChainParams& params,
                         const ChainDeviceOutput& output, cudaStream_t stream,
                         const DeviceSeedStep* seed_step);

/// verify_chain on logits with the temperature softmax fused (gpu/verify/verify_chain_logits.cuh):
/// the tokens of core::probs_from_logits on every row followed by core::verify_chain_reference, bit
/// for bit, reading per tested row only its logits (never a probability array). A row with a
/// NaN or +inf logit gives kChainBadValue, a row with every logit -inf kChainBadSum, for the
/// request that reads it. Shapes, formats and temperatures are checked on the host (InvalidInput).
cudaError_t verify_chain(const LogitsBatch& batch, const ChainParams& params,
                         const ChainDeviceOutput& output, cudaStream_t stream,
                         const DeviceSeedStep* seed_step = nullptr);

/// Test hook for the fused softmax: the probabilities p(t) and the V2 token of each of `rows`
/// logits rows exactly as the logits verifiers compute them (gpu/sampling/fused_logits.cuh),
/// written out (probs [rows, V], greedy_tokens [rows], status [rows] as ChainStatus bits; a bad row
/// gets zeros and token -1). The verifiers themselves never write probabilities; this lets a test
/// compare every value with core::probs_from_logits bit for bit. All spans are device memory.
cudaError_t fused_logits_rows(const DeviceLogits& logits, int64_t rows, int64_t vocab,
                              std::span<float> probs, std::span<int32_t> greedy_tokens,
                              std::span<uint32_t> status, cudaStream_t stream);

/// verify_chain with a mutant kernel (emulation build only).
cudaError_t verify_chain_mutant(KernelMutant mutant, const ChainBatch& batch,
                                const ChainParams& params, const ChainDeviceOutput& output,
                                cudaStream_t stream);

}  // namespace speclab::gpu
