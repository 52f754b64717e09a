// The bytes each device verification path must read per request, from gpu/README.md's tables
// ("Bytes read per request" of gpu::verify_chain and gpu::verify_block, "The verifiers on
// logits"): `speclab bench gpu` divides them by the measured time. Host code, so it is built and
// tested without CUDA.
#pragma once

#include <cstdint>

namespace speclab::cli {

/// V1/V3 on probabilities, one request with γ_b = `gamma` drafts of which `n_accepted` passed:
/// 4γ_b (tokens) + 64 B (two 32 B sectors) per tested position (min(n+1, γ_b) of them) + 4V for
/// the bonus row (n = γ_b) or 8V for the residual's p and q rows.
double chain_probs_bytes(int64_t gamma, int64_t vocab, int64_t n_accepted);

/// V2 on probabilities: 4γ_b + 4V·(n+1), one argmax pass per row up to the first mismatch.
double greedy_probs_bytes(int64_t gamma, int64_t vocab, int64_t n_accepted);

/// V5 on probabilities with τ accepted: 4γ_b + 64γ_b (the gathered p_i(x_i), q_i(x_i)) + 4V
/// (τ = γ_b, the bonus row) or 8V·(γ_b − τ) (the Z rows, the last one the residual).
double block_probs_bytes(int64_t gamma, int64_t vocab, int64_t tau);

/// V1/V3 fused on logits of `logit_bytes` = s bytes per entry (4 fp32, 2 fp16/bf16):
/// 4γ_b + 2sV·2·min(n+1, γ_b) (passes A and B of p_i and q_i per tested position) + 2sV (the
/// residual pass over p and q) or 3sV (the bonus row: passes A, B and the sampling pass).
double chain_logits_bytes(int64_t gamma, int64_t vocab, int64_t logit_bytes, int64_t n_accepted);

/// V2 fused on logits: 4γ_b + sV·(n+1) (pass A per row). A row whose tempered runner-up ties
/// the max reads sV more; the launch cannot tell which rows did, so this is not counted.
double greedy_logits_bytes(int64_t gamma, int64_t vocab, int64_t logit_bytes, int64_t n_accepted);

/// V5 fused on logits: 4γ_b + 2sV·2γ_b (passes A and B of every pair) + 2sV·(γ_b − τ) for
/// τ < γ_b (Z rows and residual) or 3sV for τ = γ_b (the bonus row).
double block_logits_bytes(int64_t gamma, int64_t vocab, int64_t logit_bytes, int64_t tau);

/// V5 on probabilities with every row split over CTAs (small batches): the first test decides
/// which rows are read, so 4γ_b + 64γ_b + 4V (τ = γ_b, the bonus row) or 8V·γ_b (τ < γ_b: every
/// Z row, including those below τ).
double block_probs_split_bytes(int64_t gamma, int64_t vocab, int64_t tau);

/// V1/V3 fused on logits with the rows' statistics reduced in parallel (small batches): passes A
/// and B of all 2γ_b + 1 rows, then 2sV (the residual pass over p and q) or sV (the bonus row's
/// sampling pass): 4γ_b + 2sV·(2γ_b + 1) + 2sV or sV.
double chain_logits_rows_bytes(int64_t gamma, int64_t vocab, int64_t logit_bytes,
                               int64_t n_accepted);

/// V2 fused on logits with the rows reduced in parallel: 4γ_b + sV·(γ_b + 1) (pass A of every
/// target row; tempered near-ties not counted, as greedy_logits_bytes).
double greedy_logits_rows_bytes(int64_t gamma, int64_t vocab, int64_t logit_bytes);

/// V5 fused on logits with the rows' statistics reduced in parallel: 4γ_b + 2sV·(2γ_b + 1), then
/// 2sV·(γ_b − τ) for τ < γ_b (Z rows and residual) or sV for τ = γ_b (the bonus sampling pass).
double block_logits_rows_bytes(int64_t gamma, int64_t vocab, int64_t logit_bytes, int64_t tau);

/// gpu::probs_from_logits over `rows` rows: the logits read once (sV) and the fp32 probabilities
/// written once (4V) per row, the least any softmax must move.
double probs_from_logits_bytes(int64_t rows, int64_t vocab, int64_t logit_bytes);

}  // namespace speclab::cli
