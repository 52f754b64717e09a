// The bytes each device verification path must read (bench/bench_gpu_bytes.hpp).
#include "bench/bench_gpu_bytes.hpp"

#include <algorithm>

namespace speclab::cli {
namespace {

// Positions V1/V3 test: up to and including the first rejection.
double tested(int64_t gamma, int64_t n_accepted) {
  return static_cast<double>(std::min(n_accepted + 1, gamma));
}

}  // namespace

double chain_probs_bytes(int64_t gamma, int64_t vocab, int64_t n_accepted) {
  const double g = static_cast<double>(gamma), v = static_cast<double>(vocab);
  return 4.0 * g + 64.0 * tested(gamma, n_accepted) + (n_accepted < gamma ? 8.0 : 4.0) * v;
}

double greedy_probs_bytes(int64_t gamma, int64_t vocab, int64_t n_accepted) {
  const double g = static_cast<double>(gamma), v = static_cast<double>(vocab);
  return 4.0 * g + 4.0 * v * static_cast<double>(n_accepted + 1);
}

double block_probs_bytes(int64_t gamma, int64_t vocab, int64_t tau) {
  const double g = static_cast<double>(gamma), v = static_cast<double>(vocab);
  const double rows = tau >= gamma ? 4.0 * v : 8.0 * v * static_cast<double>(gamma - tau);
  return 4.0 * g + 64.0 * g + rows;
}

double chain_logits_bytes(int64_t gamma, int64_t vocab, int64_t logit_bytes, int64_t n_accepted) {
  const double g = static_cast<double>(gamma);
  const double sv = static_cast<double>(logit_bytes) * static_cast<double>(vocab);
  return 4.0 * g + 4.0 * sv * tested(gamma, n_accepted) + (n_accepted < gamma ? 2.0 : 3.0) * sv;
}

double greedy_logits_bytes(int64_t gamma, int64_t vocab, int64_t logit_bytes, int64_t n_accepted) {
  const double g = static_cast<double>(gamma);
  const double sv = static_cast<double>(logit_bytes) * static_cast<double>(vocab);
  return 4.0 * g + sv * static_cast<double>(n_accepted + 1);
}

double block_logits_bytes(int64_t gamma, int64_t vocab, int64_t logit_bytes, int64_t tau) {
  const double g = static_cast<double>(gamma);
  const double sv = static_cast<double>(logit_bytes) * static_cast<double>(vocab);
  const double rows = tau >= gamma ? 3.0 * sv : 2.0 * sv * static_cast<double>(gamma - tau);
  return 4.0 * g + 4.0 * sv * g + rows;
}

double block_probs_split_bytes(int64_t gamma, int64_t vocab, int64_t tau) {
  const double g = static_cast<double>(gamma), v = static_cast<double>(vocab);
  return 4.0 * g + 64.0 * g + (tau >= gamma ? 4.0 * v : 8.0 * v * g);
}

double chain_logits_rows_bytes(int64_t gamma, int64_t vocab, int64_t logit_bytes,
                               int64_t n_accepted) {
  const double g = static_cast<double>(gamma);
  const double sv = static_cast<double>(logit_bytes) * static_cast<double>(vocab);
  return 4.0 * g + 2.0 * sv * (2.0 * g + 1.0) + (n_accepted < gamma ? 2.0 : 1.0) * sv;
}

double greedy_logits_rows_bytes(int64_t gamma, int64_t vocab, int64_t logit_bytes) {
  const double g = static_cast<double>(gamma);
  const double sv = static_cast<double>(logit_bytes) * static_cast<double>(vocab);
  return 4.0 * g + sv * (g + 1.0);
}

double block_logits_rows_bytes(int64_t gamma, int64_t vocab, int64_t logit_bytes, int64_t tau) {
  const double g = static_cast<double>(gamma);
  const double sv = static_cast<double>(logit_bytes) * static_cast<double>(vocab);
  const double rows = tau >= gamma ? sv : 2.0 * sv * static_cast<double>(gamma - tau);
  return 4.0 * g + 2.0 * sv * (2.0 * g + 1.0) + rows;
}

double probs_from_logits_bytes(int64_t rows, int64_t vocab, int64_t logit_bytes) {
  return static_cast<double>(rows) * static_cast<double>(vocab) *
         static_cast<double>(logit_bytes + 4);
}

}  // namespace speclab::cli
