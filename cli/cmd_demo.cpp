// `speclab demo`: the built-in default experiment. Verifies synthetic batches with V1 over several
// steps, checks the fast path against the reference, writes results/demo.h5 and prints the
// per-position acceptance beside its closed form (docs/verifiers.md V1: β = Σ min(p, q), E[accepted] =
// Σ_i Π_{j≤i} β_j).
#include <fmt/format.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <ctime>
#include <filesystem>
#include <limits>

#include "cli/command.hpp"
#include "core/base/error.hpp"
#include "core/base/philox.hpp"
#include "core/io/hdf5_file.hpp"
#include "core/sampling/sampling.hpp"
#include "core/stats/stats.hpp"
#include "core/verify/synthetic_batch.hpp"
#include "core/verify/verify_chain.hpp"

namespace speclab::cli {
namespace {

struct DemoOptions {
  std::string out = "results";
  int64_t batch = 256;
  int64_t gamma = 4;
  int64_t vocab = 4096;
  int64_t steps = 32;
  double draft_noise = 0.6;
  uint64_t seed = 0;
};

// Redraws every draft token x_i ~ q_i with the uniforms of (seed; request, step, position i).
void draw_drafts(ChainBatchData& d, uint64_t seed, uint32_t step) {
  for (int64_t r = 0; r < d.batch; ++r) {
    for (int64_t i = 0; i < d.gamma; ++i) {
      const RandomAddress a{
          seed, static_cast<uint32_t>(r), step, static_cast<uint32_t>(i + 1), Purpose::kDraftSample,
          0};
      const float* q = &d.probs_draft[(r * d.gamma + i) * d.vocab];
      d.draft_tokens[r * d.gamma + i] =
          sample_categorical({q, static_cast<size_t>(d.vocab)}, philox_bits(a));
    }
  }
}

std::string utc_now() {
  const std::time_t t = std::time(nullptr);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&t));
  return buf;
}

void run_demo(const DemoOptions& o) {
  if (o.batch < 1 || o.gamma < 1 || o.vocab < 2 || o.steps < 1 ||
      o.batch * o.steps > std::numeric_limits<int32_t>::max()) {
    throw InvalidInput(fmt::format(
        "demo needs --batch ≥ 1, --gamma ≥ 1, --vocab ≥ 2, --steps ≥ 1 (got {}, {}, {}, {})",
        o.batch, o.gamma, o.vocab, o.steps));
  }
  if (!(o.draft_noise >= 0.0 && std::isfinite(o.draft_noise))) {
    throw InvalidInput(
        fmt::format("--draft-noise is {}; expected a finite value ≥ 0", o.draft_noise));
  }
  const std::string started = utc_now();
  ChainBatchData data = make_synthetic_batch({.batch = o.batch,
                                              .gamma = o.gamma,
                                              .vocab = o.vocab,
                                              .draft_noise = o.draft_noise,
                                              .seed = o.seed});
  const std::vector<double> beta = acceptance_rates(data);
  const int64_t b = o.batch, g = o.gamma, n_rows = o.steps * o.batch;

  // Closed forms, per request then averaged: P(n ≥ i) = Π_{j≤i} β_j.
  std::vector<double> reach_closed(g + 1, 0.0);   // Σ_r P(position i is reached), i = 1..γ+1
  std::vector<double> length_closed(g + 1, 0.0);  // P(n = k)
  for (int64_t r = 0; r < b; ++r) {
    double reach = 1.0;
    for (int64_t i = 0; i < g; ++i) {
      reach_closed[i] += reach;
      length_closed[i] += reach * (1.0 - beta[r * g + i]);
      reach *= beta[r * g + i];
    }
    reach_closed[g] += reach;
    length_closed[g] += reach;
  }
  double expected_accepted = 0.0;
  for (int64_t i = 1; i <= g; ++i) expected_accepted += reach_closed[i] / b;
  for (double& x : length_closed) x /= b;

  std::vector<int32_t> emitted(n_rows * (g + 1)), n_accepted(n_rows);
  std::vector<uint8_t> accept_mask(n_rows * g);
  int64_t fallbacks = 0, disagreements = 0;
  double seconds = 0.0;
  for (int64_t s = 0; s < o.steps; ++s) {
    const auto step = static_cast<uint32_t>(s);
    draw_drafts(data, o.seed, step);
    const ChainParams params{.seed = o.seed, .step = step};
    const auto start = std::chrono::steady_clock::now();
    const ChainResult result = verify_chain(data.view(), params);
    seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    const ChainResult reference = verify_chain_reference(data.view(), params);
    disagreements += result.emitted_tokens != reference.emitted_tokens;
    fallbacks += result.residual_fallbacks;
    std::copy(result.emitted_tokens.begin(), result.emitted_tokens.end(),
              emitted.begin() + s * b * (g + 1));
    std::copy(result.n_accepted.begin(), result.n_accepted.end(), n_accepted.begin() + s * b);
    std::copy(result.accept_mask.begin(), result.accept_mask.end(),
              accept_mask.begin() + s * b * g);
  }

  // Empirical per-position acceptance: accepted at i given i was reached.
  std::vector<int64_t> reached(g, 0), accepted(g, 0), histogram(g + 1, 0);
  double total_accepted = 0.0;
  for (int64_t row = 0; row < n_rows; ++row) {
    const int64_t n = n_accepted[row];
    total_accepted += n;
    ++histogram[n];
    for (int64_t i = 0; i < g && i <= n; ++i) {
      ++reached[i];
      accepted[i] += i < n;
    }
  }
  std::vector<double> rate(g), rate_closed(g), rate_lower(g), rate_upper(g);
  for (int64_t i = 0; i < g; ++i) {
    rate[i] = static_cast<double>(accepted[i]) / reached[i];
    rate_closed[i] = reach_closed[i + 1] / reach_closed[i];
    const Interval ci = wilson_interval(accepted[i], reached[i], 0.95);
    rate_lower[i] = ci.lower;
    rate_upper[i] = ci.upper;
  }
  const double mean_accepted = total_accepted / n_rows;
  double alpha = 0.0;
  for (double x : beta) alpha += x;
  alpha /= static_cast<double>(beta.size());
  const double iid_emitted = (1.0 - std::pow(alpha, g + 1)) / (1.0 - alpha);

  // Results: written as demo.h5.partial and renamed on commit, so a failure leaves no half file.
  std::filesystem::create_directories(o.out);
  const std::filesystem::path path = std::filesystem::path(o.out) / "demo.h5";
  Hdf5Writer out(path);
  const Hdf5WriteOptions compressed{.deflate_level = 4};
  const int64_t shape_emitted[] = {n_rows, g + 1}, shape_rows[] = {n_rows},
                shape_mask[] = {n_rows, g}, shape_beta[] = {b, g}, shape_g[] = {g},
                shape_g1[] = {g + 1};
  out.write("emitted_tokens", std::span<const int32_t>(emitted), shape_emitted, compressed);
  out.write("n_accepted", std::span<const int32_t>(n_accepted), shape_rows, compressed);
  out.write("accept_mask", std::span<const uint8_t>(accept_mask), shape_mask, compressed);
  out.write("beta", std::span<const double>(beta), shape_beta);
  out.write("curves/position_accept_rate", std::span<const double>(rate), shape_g);
  out.write("curves/position_accept_lower95", std::span<const double>(rate_lower), shape_g);
  out.write("curves/position_accept_upper95", std::span<const double>(rate_upper), shape_g);
  out.write("curves/position_accept_closed_form", std::span<const double>(rate_closed), shape_g);
  std::vector<int32_t> histogram32(histogram.begin(), histogram.end());
  out.write("curves/accepted_length_histogram", std::span<const int32_t>(histogram32), shape_g1);
  out.write("curves/accepted_length_closed_form", std::span<const double>(length_closed), shape_g1);
  out.write_string_attribute("schema", "speclab.demo");
  out.write_int64_attribute("schema_version", 1);
  out.write_string_attribute("method", "token");
  out.write_uint64_attribute("seed", o.seed);
  out.write_int64_attribute("batch", b);
  out.write_int64_attribute("gamma", g);
  out.write_int64_attribute("vocab", o.vocab);
  out.write_int64_attribute("steps", o.steps);
  out.write_double_attribute("draft_noise", o.draft_noise);
  out.write_double_attribute("mean_accepted", mean_accepted);
  out.write_double_attribute("mean_accepted_closed_form", expected_accepted);
  out.write_double_attribute("alpha_mean_beta", alpha);
  out.write_int64_attribute("residual_fallbacks", fallbacks);
  out.write_string_attribute("started", started);
  out.write_string_attribute("finished", utc_now());
  char host[256] = {};
  gethostname(host, sizeof host - 1);
  out.write_string_attribute("host", host);
  out.commit();

  std::printf(
      "speclab demo: V1 token-level verification, %lld requests x %lld steps, gamma = %lld, "
      "V = %lld, seed %llu\n",
      static_cast<long long>(b), static_cast<long long>(o.steps), static_cast<long long>(g),
      static_cast<long long>(o.vocab), static_cast<unsigned long long>(o.seed));
  std::printf("  draft alpha (mean of beta = sum min(p, q) over rows): %.4f\n\n", alpha);
  std::printf("  position  reached  accepted   rate    95%% Wilson interval   closed form\n");
  for (int64_t i = 0; i < g; ++i) {
    std::printf("  %8lld %8lld %9lld   %.4f  [%.4f, %.4f]      %.4f\n",
                static_cast<long long>(i + 1), static_cast<long long>(reached[i]),
                static_cast<long long>(accepted[i]), rate[i], rate_lower[i], rate_upper[i],
                rate_closed[i]);
  }
  std::printf("\n  accepted length  observed   closed form\n");
  for (int64_t k = 0; k <= g; ++k) {
    std::printf("  %15lld   %.4f     %.4f\n", static_cast<long long>(k),
                static_cast<double>(histogram[k]) / n_rows, length_closed[k]);
  }
  std::printf("\n  mean accepted per step (bonus not counted): %.4f   closed form %.4f\n",
              mean_accepted, expected_accepted);
  std::printf(
      "  mean emitted per step (bonus counted):      %.4f   closed form %.4f"
      "   (i.i.d. alpha: %.4f)\n",
      mean_accepted + 1.0, expected_accepted + 1.0, iid_emitted);
  std::printf("  residual fallbacks: %lld\n", static_cast<long long>(fallbacks));
  std::printf("  fast path vs reference: %s\n",
              disagreements == 0 ? "identical tokens on every step"
                                 : fmt::format("{} steps differ", disagreements).c_str());
  std::printf("  fast path: %.3f ms per batch of %lld requests\n", 1e3 * seconds / o.steps,
              static_cast<long long>(b));
  std::printf("  wrote %s\n", path.string().c_str());
  if (disagreements != 0) throw Error("fast path and reference disagree");
}

void setup_demo(CLI::App& app) {
  auto* demo = app.add_subcommand(
      "demo", "Built-in default experiment: verify synthetic batches, write HDF5, print a summary");
  auto o = std::make_shared<DemoOptions>();
  demo->add_option("--out", o->out, "results directory")->capture_default_str();
  demo->add_option("--batch", o->batch, "requests per batch (B)")->capture_default_str();
  demo->add_option("--gamma", o->gamma, "draft tokens per request (γ)")->capture_default_str();
  demo->add_option("--vocab", o->vocab, "vocabulary size (V)")->capture_default_str();
  demo->add_option("--steps", o->steps, "verification steps")->capture_default_str();
  demo->add_option("--draft-noise", o->draft_noise,
                   "logit noise separating draft from target (sets α)")
      ->capture_default_str();
  demo->add_option("--seed", o->seed, "Philox seed")->capture_default_str();
  demo->callback([o] { run_demo(*o); });
}

const CommandRegistrar kRegistrar{"demo", &setup_demo};

}  // namespace
}  // namespace speclab::cli
