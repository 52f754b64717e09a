// `speclab bench ...` subcommands: options and entry points (bench/bench_*.cpp,
// bench/plan_validate.cpp).
#pragma once

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

namespace speclab::cli {

/// The median of timed repeats (the upper one of an even count; 0 for none), as every bench
/// reports them.
inline double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0.0 : v[v.size() / 2];
}

struct BenchVerifyOptions {
  int64_t batch = 8;
  int64_t gamma = 5;
  int64_t vocab = 32000;
  int repeats = 7;
  double draft_noise = 0.6;
  int contend = 0;    ///< competing processes spinning while the timed section runs
  bool peer = false;  ///< also time scripts/peer/torch_v0_sampler.py on the same batches
  bool json = false;
};
void run_bench_verify(const BenchVerifyOptions& options);

struct BenchSamplingOptions {
  int64_t vocab = 49152;
  int repeats = 5;
  bool json = false;
};
/// `speclab bench sampling` (bench/bench_sampling.cpp): inverse CDF against Gumbel-max per row.
void run_bench_sampling(const BenchSamplingOptions& options);

struct BenchDecodeOptions {
  std::string target = "lsm-target";
  std::string draft = "lsm-draft";
  std::vector<int64_t> gamma = {1, 2, 3, 4, 5, 6, 8};
  int64_t tokens = 256;
  int64_t batch = 1;
  double temperature = 1.0;
  uint64_t seed = 0;
  std::string workload;  ///< models with a tokenizer: a data/workloads name or file ("" = rewrite)
  std::string prompt;    ///< models with a tokenizer: one user message instead of a workload
  int contend = 0;       ///< competing processes spinning while the decodes are timed
  bool json = false;
};
void run_bench_decode(const BenchDecodeOptions& options);

struct BenchGpuOptions {
  int repeats = 15;     ///< timed launches per kernel and configuration (median)
  int64_t tokens = 64;  ///< tokens per request of the decoding-loop comparison
  bool json = false;
  /// The shapes measured; empty: the defaults (V ∈ {32000, 128256}, B ∈ {1, 8, 64, 256} — 256
  /// fills an H200's 132 SMs, so the persistent grid has rows — γ ∈ {1, 5, 8}).
  std::vector<int64_t> vocab, batch, gamma;
  /// Only the kernel rows whose name contains this (e.g. "verify_chain V1"); the decoding-loop
  /// comparison then does not run. Empty: every row and the loop.
  std::string only;
};
/// `speclab bench gpu` (bench/bench_gpu.cpp): without a device, or in a build without
/// CUDA, prints that and measures nothing.
void run_bench_gpu(const BenchGpuOptions& options);

struct PlanValidateOptions {
  std::string target = "lsm-target";  ///< model registry names (`speclab models`)
  std::string draft = "lsm-draft";
  std::vector<int64_t> batches;  ///< empty: 1, 2, 4, 8, 16 (1, 2, 4 for a target with a tokenizer)
  std::vector<int64_t> gammas = {1, 2, 4, 6};
  int64_t tokens = 64;              ///< generated per request in each timed run
  int64_t calibration_tokens = 16;  ///< per request in each calibration run
  int rounds = 5;                   ///< interleaved rounds at least
  int max_rounds = 15;              ///< and at most, until every interval is within `precision`
  /// Rounds go on until every (batch, γ) interval's half-width is at most this fraction of its
  /// median (RoundsSpeedup::relative_half_width), or max_rounds.
  double precision = 0.10;
  double temperature = 1.0;
  std::string workload;  ///< models with a tokenizer: a data/workloads name or file ("" = rewrite)
  bool json = false;
};

/// `speclab plan --validate`: the planner's prediction against decoding runs of a pair on this
/// machine, by batch size and γ, over interleaved rounds (bench/plan_validate.cpp).
void run_plan_validate(const PlanValidateOptions& options);

}  // namespace speclab::cli
