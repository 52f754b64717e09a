// `speclab bench verify`: times the chain verifier (V1) on synthetic batches and prints it beside
// its floor, the bytes the algorithm must read divided by the read bandwidth measured in the same
// run, and beside the reference implementation and a peer.
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cstdio>

#include "bench/benches.hpp"
#include "core/base/error.hpp"
#include "core/probe/membw.hpp"
#include "core/verify/synthetic_batch.hpp"
#include "core/verify/verify_chain.hpp"

namespace speclab::cli {
namespace {

// vLLM V0's torch rejection sampler (full-tensor passes over every [B, γ, V] row), timed on this
// machine kind at B = 8, γ = 5, V = 32000.
constexpr double kPeerSecondsV0Torch = 21e-3;

// Bytes V1 must read for this result: the draft tokens, p(x_i) and q(x_i) for every tested
// position, and one residual row pair (2V floats) or one bonus row (V floats) per request.
double floor_bytes(const ChainBatchData& d, const ChainResult& r) {
  double bytes = 0.0;
  for (int64_t b = 0; b < d.batch; ++b) {
    const int64_t n_draft = d.n_draft.empty() ? d.gamma : d.n_draft[b];
    const int64_t n = r.n_accepted[b];
    const int64_t tested = std::min(n + 1, n_draft);
    bytes += 4.0 * n_draft + 8.0 * tested + (n < n_draft ? 8.0 : 4.0) * d.vocab;
  }
  return bytes;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

}  // namespace

void run_bench_verify(const BenchVerifyOptions& o) {
  if (o.batch < 1 || o.gamma < 1 || o.vocab < 2 || o.repeats < 1) {
    throw InvalidInput(
        fmt::format("bench verify needs --batch ≥ 1, --gamma ≥ 1, --vocab ≥ 2, --repeats ≥ 1 (got "
                    "{}, {}, {}, {})",
                    o.batch, o.gamma, o.vocab, o.repeats));
  }
  // Enough distinct batches that together they exceed the last-level cache several times over,
  // so every timed call reads its rows from memory, as a serving system does.
  const double batch_bytes = 4.0 * o.batch * (2 * o.gamma + 1) * o.vocab;
  const int n_batches = static_cast<int>(std::clamp(256e6 / batch_bytes, 2.0, 64.0));
  std::vector<ChainBatchData> batches;
  for (int k = 0; k < n_batches; ++k) {
    batches.push_back(make_synthetic_batch({.batch = o.batch,
                                            .gamma = o.gamma,
                                            .vocab = o.vocab,
                                            .draft_noise = o.draft_noise,
                                            .seed = 1000u + k}));
  }
  // The floor uses the best read bandwidth this machine shows, one thread or all of them.
  BandwidthMeasurement bw = measure_read_bandwidth(int64_t{512} << 20, 5, 1);
  const BandwidthMeasurement bw_all = measure_read_bandwidth();
  if (bw_all.read_gbps > bw.read_gbps) bw = bw_all;

  auto time_one = [](auto&& f) {
    const auto start = std::chrono::steady_clock::now();
    f();
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  };
  std::vector<double> fast_times, ref_times, floors;
  double accepted = 0.0, residual_rows = 0.0;
  for (int rep = 0; rep < o.repeats; ++rep) {
    for (int k = 0; k < n_batches; ++k) {
      const ChainParams params{.seed = 7, .step = static_cast<uint32_t>(rep)};
      ChainResult result;
      fast_times.push_back(time_one([&] { result = verify_chain(batches[k].view(), params); }));
      floors.push_back(floor_bytes(batches[k], result) / (bw.read_gbps * 1e9));
      for (int64_t b = 0; b < o.batch; ++b) {
        accepted += result.n_accepted[b];
        residual_rows += result.n_accepted[b] < o.gamma;
      }
    }
  }
  for (int k = 0; k < std::min(n_batches, 8); ++k) {
    ref_times.push_back(time_one([&] { verify_chain_reference(batches[k].view(), {.seed = 7}); }));
  }
  const double seconds = median(fast_times);
  const double floor_seconds = median(floors);
  const double reference_seconds = median(ref_times);
  const double verified_tokens = o.batch * (o.gamma + 1.0);
  const double requests = static_cast<double>(o.repeats) * n_batches * o.batch;
  if (o.json) {
    std::printf(
        "{\"batch\": %lld, \"gamma\": %lld, \"vocab\": %lld, \"seconds_per_batch\": %.9g, "
        "\"floor_seconds\": %.9g, \"ratio_to_floor\": %.4g, \"read_gbps\": %.4g, "
        "\"bandwidth_threads\": %d, \"verified_tokens_per_s\": %.6g, "
        "\"reference_seconds_per_batch\": %.9g, \"peer_seconds_per_batch\": %.6g, "
        "\"speedup_over_peer\": %.4g, \"mean_accepted\": %.4g, \"residual_fraction\": %.4g, "
        "\"distinct_batches\": %d, \"repeats\": %d}\n",
        static_cast<long long>(o.batch), static_cast<long long>(o.gamma),
        static_cast<long long>(o.vocab), seconds, floor_seconds, seconds / floor_seconds,
        bw.read_gbps, bw.threads, verified_tokens / seconds, reference_seconds, kPeerSecondsV0Torch,
        kPeerSecondsV0Torch / seconds, accepted / requests, residual_rows / requests, n_batches,
        o.repeats);
    return;
  }
  std::printf("speclab bench verify: V1 token-level, B=%lld, gamma=%lld, V=%lld\n",
              static_cast<long long>(o.batch), static_cast<long long>(o.gamma),
              static_cast<long long>(o.vocab));
  std::printf("  %d distinct batches x %d repeats (inputs exceed the cache; medians)\n", n_batches,
              o.repeats);
  std::printf("  read bandwidth (%d threads)    %8.2f GB/s\n", bw.threads, bw.read_gbps);
  std::printf(
      "  mean accepted per request     %8.3f of %lld (residual row in %.0f%% of requests)\n",
      accepted / requests, static_cast<long long>(o.gamma), 100.0 * residual_rows / requests);
  std::printf("  %-28s %10s %12s\n", "", "ms/batch", "vs floor");
  std::printf("  %-28s %10.4f %11.2fx\n", "floor (bytes / bandwidth)", floor_seconds * 1e3, 1.0);
  std::printf("  %-28s %10.4f %11.2fx\n", "speclab fast path", seconds * 1e3,
              seconds / floor_seconds);
  std::printf("  %-28s %10.4f %11.2fx\n", "speclab reference", reference_seconds * 1e3,
              reference_seconds / floor_seconds);
  std::printf("  %-28s %10.4f %11.2fx   (quoted, vLLM V0-style torch sampler)\n", "peer",
              kPeerSecondsV0Torch * 1e3, kPeerSecondsV0Torch / floor_seconds);
  std::printf("  fast path: %.3g verified tokens/s, %.1fx faster than the peer\n",
              verified_tokens / seconds, kPeerSecondsV0Torch / seconds);
}

}  // namespace speclab::cli
