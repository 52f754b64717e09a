// `speclab bench sampling`: the cost of drawing one token from a probability row of V tokens by
// inverse CDF (sample_categorical: fixed-point sums, one uniform) and by Gumbel-max
// (sample_gumbel: the exponential race over the noise of one output position, what
// decode.sampling = "gumbel" and the coupled verifier pay per row), each beside its floor, the
// row's bytes divided by the read bandwidth measured in the same run.
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <random>
#include <vector>

#include "bench/benches.hpp"
#include "core/base/error.hpp"
#include "core/base/philox.hpp"
#include "core/io/json.hpp"
#include "core/probe/machine.hpp"
#include "core/probe/membw.hpp"
#include "core/sampling/sampling.hpp"

namespace speclab::cli {
namespace {

// Softmax rows of Gaussian logits (σ = 3: a few dozen tokens carry most of the mass, as a
// language model's rows do), enough of them to exceed the last-level cache.
std::vector<std::vector<float>> make_rows(int64_t vocab, int count) {
  std::mt19937_64 rng(20261205);
  std::normal_distribution<float> logit(0.0f, 3.0f);
  std::vector<std::vector<float>> rows(count, std::vector<float>(vocab));
  for (auto& row : rows) {
    std::vector<float> logits(vocab);
    for (float& l : logits) l = logit(rng);
    probs_from_logits(logits, SamplingParams{}, row);
  }
  return rows;
}

}  // namespace

void run_bench_sampling(const BenchSamplingOptions& o) {
  if (o.vocab < 2 || o.repeats < 1) {
    throw InvalidInput(fmt::format(
        "bench sampling needs --vocab ≥ 2 and --repeats ≥ 1 (got {}, {})", o.vocab, o.repeats));
  }
  const int count = static_cast<int>(std::clamp(256e6 / (4.0 * o.vocab), 8.0, 2048.0));
  const auto rows = make_rows(o.vocab, count);
  const BandwidthMeasurement bw = measure_read_bandwidth(int64_t{512} << 20, 5, 1);
  const double floor_seconds = 4.0 * o.vocab / (bw.read_gbps * 1e9);
  std::vector<double> inverse, gumbel;
  int64_t checksum = 0;
  for (int rep = 0; rep < o.repeats; ++rep) {
    for (const char* rule : {"inverse-cdf", "gumbel"}) {
      const auto start = std::chrono::steady_clock::now();
      for (int k = 0; k < count; ++k) {
        const uint32_t position = static_cast<uint32_t>(rep * count + k);
        checksum += rule[0] == 'g'
                        ? sample_gumbel(rows[k], 11, 0, position)
                        : sample_categorical(
                              rows[k], philox_bits({11, 0, position, 0, Purpose::kPlainSample, 0}));
      }
      const double per_row =
          std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() / count;
      (rule[0] == 'g' ? gumbel : inverse).push_back(per_row);
    }
  }
  const double t_inverse = median(inverse), t_gumbel = median(gumbel);
  const MachineIdentity& machine = machine_identity();
  if (o.json) {
    Json json = machine_json(machine);
    json.update(Json{{"vocab", o.vocab},
                     {"rows", count},
                     {"repeats", o.repeats},
                     {"read_gbps", bw.read_gbps},
                     {"floor_seconds_per_row", floor_seconds},
                     {"inverse_cdf_seconds_per_row", t_inverse},
                     {"gumbel_seconds_per_row", t_gumbel},
                     {"inverse_cdf_ratio_to_floor", t_inverse / floor_seconds},
                     {"gumbel_ratio_to_floor", t_gumbel / floor_seconds},
                     {"gumbel_over_inverse_cdf", t_gumbel / t_inverse},
                     {"checksum", checksum}});
    std::printf("%s\n", json_text(json).c_str());
    return;
  }
  std::printf("speclab bench sampling: one token from a row of V=%lld (%d rows x %d repeats)\n",
              static_cast<long long>(o.vocab), count, o.repeats);
  std::printf("  machine: %s\n", machine_line(machine).c_str());
  std::printf("  read bandwidth (1 thread)   %8.2f GB/s\n", bw.read_gbps);
  std::printf("  %-26s %10s %10s\n", "", "us/row", "vs floor");
  std::printf("  %-26s %10.2f %9.2fx\n", "floor (row bytes / bw)", floor_seconds * 1e6, 1.0);
  std::printf("  %-26s %10.2f %9.2fx\n", "inverse CDF", t_inverse * 1e6, t_inverse / floor_seconds);
  std::printf("  %-26s %10.2f %9.2fx  (%.2fx inverse CDF)\n", "Gumbel-max", t_gumbel * 1e6,
              t_gumbel / floor_seconds, t_gumbel / t_inverse);
}

}  // namespace speclab::cli
