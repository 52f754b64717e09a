// Chain verifiers V1-V3 of SPEC.md on the device: the same ChainBatch/ChainParams as core and the
// same Philox addressing, so gpu::verify_chain and core::verify_chain_reference return the same
// tokens for the same inputs. One CTA per request; algorithm and bytes read in gpu/README.md.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>
#include <span>

#include "core/verify_chain.hpp"

namespace speclab::gpu {

/// Per-request status bits (0 = ok). Any nonzero status means the request's outputs are
/// n_accepted = 0, every emitted token -1, accept_mask 0: a bad value never becomes a token.
enum ChainStatus : uint32_t {
  kChainOk = 0,
  kChainBadValue = 1u << 0,       ///< NaN, inf, negative (or a gathered value > 1 + 1e-4)
  kChainBadSum = 1u << 1,         ///< a scanned row does not sum to 1 ± 1e-4
  kChainBadToken = 1u << 2,       ///< a draft token outside [0, V)
  kChainBadDraftCount = 1u << 3,  ///< n_draft[b] outside [0, γ]
  kChainInternal = 1u << 4,       ///< the sampled token was not found (never expected)
};

/// Device buffers the kernel writes; every entry of every request is written.
struct ChainDeviceOutput {
  std::span<int32_t> emitted_tokens;     ///< [B, γ+1] accepted prefix + one token, then -1
  std::span<int32_t> n_accepted;         ///< [B]
  std::span<uint8_t> accept_mask;        ///< [B, γ]
  std::span<uint8_t> residual_fallback;  ///< [B] 1 where the residual had zero mass (SPEC.md V1)
  std::span<uint32_t> status;            ///< [B] ChainStatus bits
};

/// Verifies a batch on `stream`. Every pointer in `batch` and `output` is device memory (their
/// sizes are checked on the host; their values are validated by the kernel, per request, in the
/// rows it reads: see `status`). Throws InvalidInput for bad shapes or parameters, as core does;
/// returns the launch status and never synchronises.
cudaError_t verify_chain(const ChainBatch& batch, const ChainParams& params,
                         const ChainDeviceOutput& output, cudaStream_t stream);

/// Deliberately broken kernels for the emulation's mutant tests (TESTING.md "Mutants"); built
/// into the emulation library only (gpu/verify_chain_mutants.cu).
enum class KernelMutant {
  kNone,
  kMissingSync,         ///< no __syncthreads between writing warp totals and scanning them
  kGridStrideOffByOne,  ///< the row pass reads token V (t <= V instead of t < V)
  kShuffleOffset,       ///< the warp scan's shuffle offsets start at 2 instead of 1
  kShuffleMask,         ///< the warp sum shuffles with mask 0x0000ffff while all 32 lanes call
};

/// verify_chain with a mutant kernel (emulation build only).
cudaError_t verify_chain_mutant(KernelMutant mutant, const ChainBatch& batch,
                                const ChainParams& params, const ChainDeviceOutput& output,
                                cudaStream_t stream);

}  // namespace speclab::gpu
