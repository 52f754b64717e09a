// Block verification (docs/verifiers.md V5) on the device: the same ChainBatch and BlockParams as
// core::verify_block, the same Philox addresses, the same outputs and status conventions as
// gpu::verify_chain, and the same tokens as core for the same inputs.
// One CTA per request; algorithm and bytes read in gpu/README.md "gpu::verify_block", and why
// a parallel Z_i still gives core's decisions in proofs/gpu_kernels.md §1.
#pragma once

#include <cuda_runtime_api.h>

#include "core/verify/verify_block.hpp"
#include "core/verify/verify_chain.hpp"
#include "gpu/verify/verify_chain.hpp"

namespace speclab::gpu {

/// Test hooks of the block kernel (defaults are the production behaviour).
struct BlockKernelOptions {
  /// Decide every η_i ≤ h_i with the serial (core-order) Z_i, as if every test were a near-tie:
  /// lets the tests check the serial path token for token.
  bool always_serial_z = false;
  /// When not null (device memory), seed and step are read from it and BlockParams' are ignored
  /// (CUDA graphs, see DeviceSeedStep).
  const DeviceSeedStep* seed_step = nullptr;
};

/// Verifies a batch with docs/verifiers.md V5 on `stream`. Every pointer in `batch` and `output` is
/// device memory; probs_draft is required. Shapes and parameters are checked on the host (throws
/// InvalidInput, as core does); values are checked by the kernel in the rows it reads (see the
/// byte counts above) and a request with bad input gets a nonzero ChainStatus with n_accepted = 0
/// and every emitted token -1. n_accepted = τ, accept_mask marks positions 1..τ,
/// residual_fallback as docs/verifiers.md V5. With output.workspace (ChainWorkspace) a small batch
/// splits every row it needs over slices: at τ = γ_b the bonus row alone (4V), otherwise all γ_b
/// Z rows (8V·γ_b, rows below τ too), with the same tokens. Returns the launch status and never
/// synchronises.
cudaError_t verify_block(const ChainBatch& batch, const BlockParams& params,
                         const ChainDeviceOutput& output, cudaStream_t stream,
                         const BlockKernelOptions& options = {});

/// verify_block on logits with the temperature softmax fused (see LogitsBatch): the tokens of
/// core::probs_from_logits on every row followed by core::verify_block, bit for bit. Every row
/// 1..γ_b of p and q is reduced once (max and normaliser: two reads of s-byte logits, 2sV per row)
/// for the gathered p_i(x_i), q_i(x_i); the Z rows, the residual and the bonus row are then
/// computed on the fly from the logits. Bytes read per request (s-byte logits): 4γ_b +
/// 4sV·γ_b (the reductions) + 2sV·(γ_b − τ) for τ < γ_b (Z rows, the last one the residual) or
/// 3sV for τ = γ_b (the bonus row: its reduction and the sampling pass); gpu/README.md "The
/// verifiers on logits".
cudaError_t verify_block(const LogitsBatch& batch, const BlockParams& params,
                         const ChainDeviceOutput& output, cudaStream_t stream,
                         const BlockKernelOptions& options = {});

}  // namespace speclab::gpu
