// Speculative decoding of a LinearSoftmax pair entirely on the device (docs/verifiers.md V1-V3,
// V5): per step the rank-r draft proposes γ tokens (one draft pass per position over all B
// requests, x_i ~ q_i sampled on the device with core's Philox address and fixed-point rule), the
// target scores the γ+1 positions of every request with one GEMM pair, gpu::verify_chain (or
// gpu::verify_block) verifies, and a commit kernel appends the emitted tokens. By default the
// softmax is fused into the draft sampler and the verifiers (both read logits) and one step is
// captured in a CUDA graph and replayed. Addresses, ragged
// γ_b = min(γ, tokens left − 1) and request ids are core::speculative_decode's, so on the same
// seed the two produce the same tokens wherever float rounding of the probabilities does not move
// a decision across its boundary.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>
#include <span>
#include <vector>

#include "core/decode/decode.hpp"
#include "gpu/models/linear_softmax.hpp"

namespace speclab::gpu {

/// How the device loop runs; every combination gives the same tokens and metrics.
struct DeviceDecodeOptions {
  /// Capture one step (plan, draft positions, target, verify, commit) in a CUDA graph after one
  /// uncaptured warm-up step and replay it for the rest. Needs the models on a stream other than
  /// the legacy one: if they are on stream 0 the loop runs them on a stream of its own for the
  /// call. false: every step's launches are issued from the host.
  bool graph = true;
  /// Draft sampling from the draft's logits (gpu::sample_logits_rows) and the verifiers on a
  /// LogitsBatch of both models' logits: no probability row is written. false: probabilities
  /// first (gpu::probs_from_logits), then gpu::sample_rows and the verifiers on probabilities.
  bool fused_softmax = true;
};

/// Speculative decoding as core::speculative_decode (VerifierFamily kChain or kBlock; sampling
/// temperature-only for both models). Every step runs without a host synchronisation; between
/// steps the host reads one counter (how many requests are still active). Fills tokens and the
/// step metrics (steps, tokens, step_accepted/emitted/drafted in (step, request) order over the
/// active requests, per-position counts, the accepted-length histogram, accepted and tested
/// positions, residual fallbacks, seconds); alpha_sum_min and model timings stay 0. Throws
/// InvalidInput for a bad config or prompt, and Error when the device reports a bad row.
DecodeResult speculative_decode(LinearSoftmaxDevice& target, LinearSoftmaxDevice& draft,
                                std::span<const std::vector<int32_t>> prompts,
                                const DecodeConfig& config,
                                const DeviceDecodeOptions& options = {});

}  // namespace speclab::gpu
