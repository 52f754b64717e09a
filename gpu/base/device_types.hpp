// The device types every gpu/ layer shares: the per-request status bits the row checks and the
// verifiers report, the seed word a CUDA graph reads, and the kernel-mutant switch the primitives
// take (a mutant is compiled into the emulation library only).
#pragma once

#include <cstdint>

namespace speclab::gpu {

/// Per-request status bits (0 = ok). Any nonzero status means the request's outputs are
/// n_accepted = 0, every emitted token -1, accept_mask 0: a bad value never becomes a token.
enum ChainStatus : uint32_t {
  kChainOk = 0,
  kChainBadValue = 1u << 0,         ///< NaN, inf, negative (or a gathered value > 1 + 1e-4)
  kChainBadSum = 1u << 1,           ///< a scanned row does not sum to 1 ± 1e-4
  kChainBadToken = 1u << 2,         ///< a draft token outside [0, V)
  kChainBadDraftCount = 1u << 3,    ///< n_draft[b] outside [0, γ]
  kChainInternal = 1u << 4,         ///< the sampled token was not found (never expected)
  kChainImpossibleDraft = 1u << 5,  ///< a draft token x with q(x) = 0 (drafted_from, rules.hpp)
};

/// Seed and step in device memory. A launch captured in a CUDA graph keeps the argument values it
/// was captured with; a kernel given this word reads seed and step from it instead of
/// ChainParams/BlockParams, so a replayed graph verifies a new step after a cudaMemcpyAsync (or a
/// kernel) writes the word, with no host synchronisation and no re-capture.
struct DeviceSeedStep {
  uint64_t seed = 0;
  uint32_t step = 0;
  uint32_t reserved = 0;  ///< keeps the word 16 bytes; ignored
};

/// Deliberately broken primitives for the emulation's mutant tests (docs/testing.md "Mutants"): the
/// warp and block reductions and the row pass take one as a template argument; kNone everywhere
/// but gpu/verify/verify_chain_mutants.cu, which is built into the emulation library only.
enum class KernelMutant {
  kNone,
  kMissingSync,         ///< no __syncthreads between writing warp totals and scanning them
  kGridStrideOffByOne,  ///< the row pass reads token V (t <= V instead of t < V)
  kShuffleOffset,       ///< the warp scan's shuffle offsets start at 2 instead of 1
  kShuffleMask,         ///< the warp sum shuffles with mask 0x0000ffff while all 32 lanes call
};

}  // namespace speclab::gpu
