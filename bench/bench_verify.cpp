// `speclab bench verify`: times the chain verifier (V1) on synthetic batches and prints it beside
// its floor, the bytes the algorithm must read divided by the read bandwidth measured in the same
// run, beside the reference implementation and, with --peer, beside a torch sampler in the style
// of vLLM V0's (scripts/peer/torch_v0_sampler.py) timed on the same batches in the same run.
#include <fmt/format.h>
#include <omp.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <optional>
#include <string>

#include "bench/benches.hpp"
#include "bench/contention.hpp"
#include "core/base/error.hpp"
#include "core/io/hdf5_file.hpp"
#include "core/io/json.hpp"
#include "core/probe/machine.hpp"
#include "core/probe/membw.hpp"
#include "core/verify/synthetic_batch.hpp"
#include "core/verify/verify_chain.hpp"
#include "experiments/project_files.hpp"

namespace speclab::cli {
namespace {

namespace fs = std::filesystem;

// Batches handed to the peer: its time per batch is tens of milliseconds, far above what the cache
// could save it, so a few suffice.
constexpr int kPeerBatches = 4;

struct PeerResult {
  double seconds = 0.0;
  std::string torch_version;
  int threads = 0;
};

// Runs scripts/peer/torch_v0_sampler.py on the first kPeerBatches batches; nullopt (with the reason
// printed) when the script, Python or torch is missing or the script fails.
std::optional<PeerResult> run_peer(const std::vector<ChainBatchData>& batches, int repeats) {
  const std::optional<fs::path> script =
      experiments::find_project_file("scripts/peer/torch_v0_sampler.py");
  if (!script) {
    std::fprintf(stderr,
                 "speclab bench verify: --peer: scripts/peer/torch_v0_sampler.py not found "
                 "above the executable (set SPECLAB_SOURCE); no peer timed\n");
    return std::nullopt;
  }
  const fs::path file =
      fs::temp_directory_path() / fmt::format("speclab-peer-{}.h5", static_cast<long>(getpid()));
  {
    Hdf5Writer out(file);
    for (int k = 0; k < std::min<int>(kPeerBatches, static_cast<int>(batches.size())); ++k) {
      const ChainBatchData& d = batches[k];
      const int64_t target_shape[] = {d.batch, d.gamma + 1, d.vocab};
      const int64_t draft_shape[] = {d.batch, d.gamma, d.vocab};
      const int64_t token_shape[] = {d.batch, d.gamma};
      out.write(fmt::format("{}/probs_target", k), d.probs_target, target_shape);
      out.write(fmt::format("{}/probs_draft", k), d.probs_draft, draft_shape);
      out.write(fmt::format("{}/draft_tokens", k), d.draft_tokens, token_shape);
    }
    out.commit();
  }
  const std::string python = experiments::python_for_helpers();
  std::vector<std::string> args = {python,
                                   script->string(),
                                   file.string(),
                                   "--threads",
                                   fmt::format("{}", omp_get_max_threads()),
                                   "--repeats",
                                   fmt::format("{}", repeats)};
  std::string output, failure;
  int code = 0;
  try {
    code = experiments::run_helper(args, &output);
  } catch (const InvalidInput& e) {
    failure = e.what();
  }
  std::error_code ec;
  fs::remove(file, ec);
  if (!failure.empty() || code != 0) {
    std::fprintf(stderr, "speclab bench verify: --peer: %s %s did not run (%s); no peer timed\n",
                 python.c_str(), script->c_str(),
                 failure.empty() ? "see its message above" : failure.c_str());
    return std::nullopt;
  }
  // The script prints one JSON object, on the last line of its output.
  PeerResult peer;
  const size_t last_line = output.find_last_of('\n', output.size() >= 2 ? output.size() - 2 : 0);
  const Json printed = Json::parse(
      output.substr(last_line == std::string::npos ? 0 : last_line + 1), nullptr, false);
  if (printed.is_object()) {
    peer.seconds = printed.value("seconds_per_batch", 0.0);
    peer.torch_version = printed.value("torch", std::string());
    peer.threads = printed.value("threads", 0);
  }
  if (!(peer.seconds > 0.0)) {
    std::fprintf(stderr, "speclab bench verify: --peer: unreadable output: %s\n", output.c_str());
    return std::nullopt;
  }
  return peer;
}

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

}  // namespace

void run_bench_verify(const BenchVerifyOptions& o) {
  if (o.batch < 1 || o.gamma < 1 || o.vocab < 2 || o.repeats < 1 || o.contend < 0) {
    throw InvalidInput(
        fmt::format("bench verify needs --batch ≥ 1, --gamma ≥ 1, --vocab ≥ 2, --repeats ≥ 1, "
                    "--contend ≥ 0 (got {}, {}, {}, {}, {})",
                    o.batch, o.gamma, o.vocab, o.repeats, o.contend));
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
  std::optional<CompetingLoad> load;
  if (o.contend > 0) load.emplace(o.contend);
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
  const std::optional<PeerResult> peer = o.peer ? run_peer(batches, o.repeats) : std::nullopt;
  load.reset();
  const double seconds = median(fast_times);
  const double floor_seconds = median(floors);
  const double reference_seconds = median(ref_times);
  const double verified_tokens = o.batch * (o.gamma + 1.0);
  const double requests = static_cast<double>(o.repeats) * n_batches * o.batch;
  const MachineIdentity& machine = machine_identity();
  if (o.json) {
    Json json = machine_json(machine);
    json.update(Json{{"batch", o.batch},
                     {"gamma", o.gamma},
                     {"vocab", o.vocab},
                     {"contending_processes", o.contend},
                     {"seconds_per_batch", seconds},
                     {"floor_seconds", floor_seconds},
                     {"ratio_to_floor", seconds / floor_seconds},
                     {"read_gbps", bw.read_gbps},
                     {"bandwidth_threads", bw.threads},
                     {"verified_tokens_per_s", verified_tokens / seconds},
                     {"reference_seconds_per_batch", reference_seconds}});
    if (peer) {
      json["peer"] = fmt::format("torch {} vLLM-V0-style sampler", peer->torch_version);
      json["peer_threads"] = peer->threads;
      json["peer_seconds_per_batch"] = peer->seconds;
      json["speedup_over_peer"] = peer->seconds / seconds;
    } else {
      json["peer"] = nullptr;
      json["peer_seconds_per_batch"] = nullptr;
      json["speedup_over_peer"] = nullptr;
    }
    json.update(Json{{"mean_accepted", accepted / requests},
                     {"residual_fraction", residual_rows / requests},
                     {"distinct_batches", n_batches},
                     {"repeats", o.repeats}});
    std::printf("%s\n", json_text(json).c_str());
    return;
  }
  std::printf("speclab bench verify: V1 token-level, B=%lld, gamma=%lld, V=%lld\n",
              static_cast<long long>(o.batch), static_cast<long long>(o.gamma),
              static_cast<long long>(o.vocab));
  std::printf("  machine: %s\n", machine_line(machine).c_str());
  if (o.contend > 0) {
    std::printf("  timed beside %d competing process%s spinning on a core each\n", o.contend,
                o.contend == 1 ? "" : "es");
  }
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
  if (peer) {
    std::printf("  %-28s %10.4f %11.2fx   (torch %s, %d thread%s, same batches)\n",
                "peer: vLLM V0-style torch", peer->seconds * 1e3, peer->seconds / floor_seconds,
                peer->torch_version.c_str(), peer->threads, peer->threads == 1 ? "" : "s");
    std::printf("  fast path: %.3g verified tokens/s, %.1fx faster than the peer\n",
                verified_tokens / seconds, peer->seconds / seconds);
  } else {
    std::printf("  fast path: %.3g verified tokens/s%s\n", verified_tokens / seconds,
                o.peer ? "" : " (--peer also times a vLLM V0-style torch sampler)");
  }
}

}  // namespace speclab::cli
