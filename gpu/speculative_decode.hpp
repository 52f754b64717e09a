// Speculative decoding of a LinearSoftmax pair entirely on the device (docs/verifiers.md V1-V3,
// V5): per step the rank-r draft proposes γ tokens (one draft pass per position over all B
// requests, x_i ~ q_i sampled on the device with core's Philox address and fixed-point rule), the
// target scores the γ+1 positions of every request with one GEMM pair, gpu::verify_chain (or
// gpu::verify_block) verifies, and a commit kernel appends the emitted tokens. Addresses, ragged
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

/// Speculative decoding as core::speculative_decode (VerifierFamily kChain or kBlock; sampling
/// temperature-only for both models). Every step runs without a host synchronisation; between
/// steps the host reads one counter (how many requests are still active). Fills tokens and the
/// step metrics (steps, tokens, step_accepted/emitted/drafted in (step, request) order over the
/// active requests, per-position counts, the accepted-length histogram, accepted and tested
/// positions, residual fallbacks, seconds); alpha_sum_min and model timings stay 0. Throws
/// InvalidInput for a bad config or prompt, and Error when the device reports a bad row.
DecodeResult speculative_decode(LinearSoftmaxDevice& target, LinearSoftmaxDevice& draft,
                                std::span<const std::vector<int32_t>> prompts,
                                const DecodeConfig& config);

}  // namespace speclab::gpu
