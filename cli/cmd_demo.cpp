// `speclab demo`: the built-in default experiment. Verifies synthetic batches with V1 over several
// steps, checks the fast path against the reference, writes results/demo.h5 and prints the
// per-position acceptance beside its closed form (docs/verifiers.md V1: β = Σ min(p, q),
// E[accepted] = Σ_i Π_{j≤i} β_j).
#include <fmt/format.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <ctime>
#include <filesystem>
#include <limits>
#include <string>
#include <string_view>
#include <vector>

#include "cli/command.hpp"
#include "cli/json.hpp"
#include "core/base/error.hpp"
#include "core/base/philox.hpp"
#include "core/io/hdf5_file.hpp"
#include "core/sampling/sampling.hpp"
#include "core/stats/stats.hpp"
#include "core/verify/synthetic_batch.hpp"
#include "core/verify/verify_chain.hpp"
#include "experiments/out_dir.hpp"
#include "experiments/results.hpp"

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
  bool json = false;
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

void check_demo_options(const DemoOptions& o) {
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
}

// docs/verifiers.md V1's closed forms from the batch's β, per request then averaged:
// P(n ≥ i) = Π_{j≤i} β_j.
struct ClosedForms {
  std::vector<double> reach;   // Σ_r P(position i is reached), i = 1..γ+1
  std::vector<double> length;  // P(n = k), k = 0..γ
  double expected_accepted = 0.0;
};

ClosedForms closed_forms(const std::vector<double>& beta, int64_t b, int64_t g) {
  ClosedForms c{std::vector<double>(g + 1, 0.0), std::vector<double>(g + 1, 0.0)};
  for (int64_t r = 0; r < b; ++r) {
    double reach = 1.0;
    for (int64_t i = 0; i < g; ++i) {
      c.reach[i] += reach;
      c.length[i] += reach * (1.0 - beta[r * g + i]);
      reach *= beta[r * g + i];
    }
    c.reach[g] += reach;
    c.length[g] += reach;
  }
  for (int64_t i = 1; i <= g; ++i) c.expected_accepted += c.reach[i] / b;
  for (double& x : c.length) x /= b;
  return c;
}

// Every step's fast-path outputs, rows in step-major order, and how the reference compared.
struct DemoSteps {
  std::vector<int32_t> emitted, n_accepted;
  std::vector<uint8_t> accept_mask;
  int64_t fallbacks = 0, disagreements = 0;
  double seconds = 0.0;  // in the fast path only
};

DemoSteps run_steps(ChainBatchData& data, const DemoOptions& o) {
  const int64_t b = o.batch, g = o.gamma, n_rows = o.steps * o.batch;
  DemoSteps out{std::vector<int32_t>(n_rows * (g + 1)), std::vector<int32_t>(n_rows),
                std::vector<uint8_t>(n_rows * g)};
  for (int64_t s = 0; s < o.steps; ++s) {
    const auto step = static_cast<uint32_t>(s);
    draw_drafts(data, o.seed, step);
    const ChainParams params{.seed = o.seed, .step = step};
    const auto start = std::chrono::steady_clock::now();
    const ChainResult result = verify_chain(data.view(), params);
    out.seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    const ChainResult reference = verify_chain_reference(data.view(), params);
    out.disagreements += result.emitted_tokens != reference.emitted_tokens;
    out.fallbacks += result.residual_fallbacks;
    std::copy(result.emitted_tokens.begin(), result.emitted_tokens.end(),
              out.emitted.begin() + s * b * (g + 1));
    std::copy(result.n_accepted.begin(), result.n_accepted.end(), out.n_accepted.begin() + s * b);
    std::copy(result.accept_mask.begin(), result.accept_mask.end(),
              out.accept_mask.begin() + s * b * g);
  }
  return out;
}

// The observed acceptance beside the closed forms: per position, accepted at i given i was
// reached, with a 95% Wilson interval; the accepted-length histogram; α as the mean β.
struct DemoCurves {
  std::vector<int64_t> reached, accepted, histogram;
  std::vector<double> rate, rate_closed, rate_lower, rate_upper;
  double mean_accepted = 0.0;
  double alpha = 0.0;
  double iid_emitted = 0.0;  // E[emitted] were every β equal to α
};

DemoCurves demo_curves(const DemoSteps& steps, const ClosedForms& closed,
                       const std::vector<double>& beta, int64_t g) {
  DemoCurves c{std::vector<int64_t>(g, 0), std::vector<int64_t>(g, 0),
               std::vector<int64_t>(g + 1, 0)};
  double total_accepted = 0.0;
  for (const int32_t n : steps.n_accepted) {
    total_accepted += n;
    ++c.histogram[n];
    for (int64_t i = 0; i < g && i <= n; ++i) {
      ++c.reached[i];
      c.accepted[i] += i < n;
    }
  }
  c.rate.resize(g), c.rate_closed.resize(g), c.rate_lower.resize(g), c.rate_upper.resize(g);
  for (int64_t i = 0; i < g; ++i) {
    c.rate[i] = static_cast<double>(c.accepted[i]) / c.reached[i];
    c.rate_closed[i] = closed.reach[i + 1] / closed.reach[i];
    const Interval ci = wilson_interval(c.accepted[i], c.reached[i], 0.95);
    c.rate_lower[i] = ci.lower;
    c.rate_upper[i] = ci.upper;
  }
  c.mean_accepted = total_accepted / static_cast<double>(steps.n_accepted.size());
  for (double x : beta) c.alpha += x;
  c.alpha /= static_cast<double>(beta.size());
  c.iid_emitted = (1.0 - std::pow(c.alpha, g + 1)) / (1.0 - c.alpha);
  return c;
}

struct DemoResult {
  std::string started;
  std::vector<double> beta;  // [B, γ]: Σ min(p, q) of every row
  ClosedForms closed;
  DemoSteps steps;
  DemoCurves curves;
};

void write_demo_datasets(Hdf5Writer& out, const DemoOptions& o, const DemoResult& d) {
  const int64_t b = o.batch, g = o.gamma, n_rows = o.steps * o.batch;
  const Hdf5WriteOptions compressed{.deflate_level = 4};
  const int64_t shape_emitted[] = {n_rows, g + 1}, shape_rows[] = {n_rows},
                shape_mask[] = {n_rows, g}, shape_beta[] = {b, g}, shape_g[] = {g},
                shape_g1[] = {g + 1};
  out.write("emitted_tokens", d.steps.emitted, shape_emitted, compressed);
  out.write("n_accepted", d.steps.n_accepted, shape_rows, compressed);
  out.write("accept_mask", d.steps.accept_mask, shape_mask, compressed);
  out.write("beta", d.beta, shape_beta);
  out.write("curves/position_accept_rate", d.curves.rate, shape_g);
  out.write("curves/position_accept_lower95", d.curves.rate_lower, shape_g);
  out.write("curves/position_accept_upper95", d.curves.rate_upper, shape_g);
  out.write("curves/position_accept_closed_form", d.curves.rate_closed, shape_g);
  const std::vector<int32_t> histogram32(d.curves.histogram.begin(), d.curves.histogram.end());
  out.write("curves/accepted_length_histogram", histogram32, shape_g1);
  out.write("curves/accepted_length_closed_form", d.closed.length, shape_g1);
}

void write_demo_attributes(Hdf5Writer& out, const DemoOptions& o, const DemoResult& d) {
  out.write_attribute("schema", "speclab.demo");
  out.write_attribute<int64_t>("schema_version", 1);
  out.write_attribute("method", "token");
  out.write_attribute<uint64_t>("seed", o.seed);
  out.write_attribute<int64_t>("batch", o.batch);
  out.write_attribute<int64_t>("gamma", o.gamma);
  out.write_attribute<int64_t>("vocab", o.vocab);
  out.write_attribute<int64_t>("steps", o.steps);
  out.write_attribute<double>("draft_noise", o.draft_noise);
  out.write_attribute<double>("mean_accepted", d.curves.mean_accepted);
  out.write_attribute<double>("mean_accepted_closed_form", d.closed.expected_accepted);
  out.write_attribute<double>("alpha_mean_beta", d.curves.alpha);
  out.write_attribute<int64_t>("residual_fallbacks", d.steps.fallbacks);
  out.write_attribute("started", d.started);
  out.write_attribute("finished", utc_now());
  char host[256] = {};
  gethostname(host, sizeof host - 1);
  out.write_attribute("host", host);
  experiments::write_machine_attributes(out);
}

// OUT/demo.h5, which Hdf5Writer fills under its partial_path() name and renames on commit, so a
// failure leaves no half file.
std::filesystem::path write_demo(const DemoOptions& o, const DemoResult& d) {
  const std::filesystem::path path = std::filesystem::path(o.out) / "demo.h5";
  Hdf5Writer out(path);
  write_demo_datasets(out, o, d);
  write_demo_attributes(out, o, d);
  out.commit();
  return path;
}

void print_demo_positions(const DemoOptions& o, const DemoResult& d) {
  const DemoCurves& c = d.curves;
  const int64_t g = o.gamma, n_rows = o.steps * o.batch;
  std::printf(
      "speclab demo: V1 token-level verification, %lld requests x %lld steps, gamma = %lld, "
      "V = %lld, seed %llu\n",
      static_cast<long long>(o.batch), static_cast<long long>(o.steps), static_cast<long long>(g),
      static_cast<long long>(o.vocab), static_cast<unsigned long long>(o.seed));
  std::printf("  draft alpha (mean of beta = sum min(p, q) over rows): %.4f\n\n", c.alpha);
  std::printf("  position  reached  accepted   rate    95%% Wilson interval   closed form\n");
  for (int64_t i = 0; i < g; ++i) {
    std::printf("  %8lld %8lld %9lld   %.4f  [%.4f, %.4f]      %.4f\n",
                static_cast<long long>(i + 1), static_cast<long long>(c.reached[i]),
                static_cast<long long>(c.accepted[i]), c.rate[i], c.rate_lower[i], c.rate_upper[i],
                c.rate_closed[i]);
  }
  std::printf("\n  accepted length  observed   closed form\n");
  for (int64_t k = 0; k <= g; ++k) {
    std::printf("  %15lld   %.4f     %.4f\n", static_cast<long long>(k),
                static_cast<double>(c.histogram[k]) / n_rows, d.closed.length[k]);
  }
}

void print_demo_summary(const DemoOptions& o, const DemoResult& d,
                        const std::filesystem::path& path) {
  const DemoCurves& c = d.curves;
  const double expected_accepted = d.closed.expected_accepted;
  std::printf("\n  mean accepted per step (bonus not counted): %.4f   closed form %.4f\n",
              c.mean_accepted, expected_accepted);
  std::printf(
      "  mean emitted per step (bonus counted):      %.4f   closed form %.4f"
      "   (i.i.d. alpha: %.4f)\n",
      c.mean_accepted + 1.0, expected_accepted + 1.0, c.iid_emitted);
  std::printf("  residual fallbacks: %lld\n", static_cast<long long>(d.steps.fallbacks));
  const int64_t disagreements = d.steps.disagreements;
  std::printf("  fast path vs reference: %s\n",
              disagreements == 0 ? "identical tokens on every step"
                                 : fmt::format("{} steps differ", disagreements).c_str());
  std::printf("  fast path: %.3f ms per batch of %lld requests\n", 1e3 * d.steps.seconds / o.steps,
              static_cast<long long>(o.batch));
  std::printf("  wrote %s\n", path.string().c_str());
}

void print_demo_json(const DemoOptions& o, const DemoResult& d, const std::filesystem::path& path) {
  const DemoCurves& c = d.curves;
  const int64_t n_rows = o.steps * o.batch;
  std::vector<double> observed_length;
  for (const int64_t n : c.histogram) {
    observed_length.push_back(static_cast<double>(n) / static_cast<double>(n_rows));
  }
  Json reached = Json::array(), accepted = Json::array();
  for (int64_t i = 0; i < o.gamma; ++i) {
    reached.push_back(c.reached[i]);
    accepted.push_back(c.accepted[i]);
  }
  print_json_line({{"file", path.string()},
                   {"batch", o.batch},
                   {"gamma", o.gamma},
                   {"vocab", o.vocab},
                   {"steps", o.steps},
                   {"seed", o.seed},
                   {"alpha", c.alpha},
                   {"position_reached", reached},
                   {"position_accepted", accepted},
                   {"position_acceptance_conditional", c.rate},
                   {"position_acceptance_conditional_lower95", c.rate_lower},
                   {"position_acceptance_conditional_upper95", c.rate_upper},
                   {"position_acceptance_conditional_closed_form", c.rate_closed},
                   {"accepted_length_observed", observed_length},
                   {"accepted_length_closed_form", d.closed.length},
                   {"mean_accepted", c.mean_accepted},
                   {"mean_accepted_closed_form", d.closed.expected_accepted},
                   {"residual_fallbacks", d.steps.fallbacks},
                   {"fast_path_matches_reference", d.steps.disagreements == 0},
                   {"fast_path_ms_per_batch", 1e3 * d.steps.seconds / o.steps}});
}

void run_demo(const DemoOptions& o) {
  check_demo_options(o);
  experiments::prepare_out_dir(o.out, "--out", "results directory");
  DemoResult d;
  d.started = utc_now();
  ChainBatchData data = make_synthetic_batch({.batch = o.batch,
                                              .gamma = o.gamma,
                                              .vocab = o.vocab,
                                              .draft_noise = o.draft_noise,
                                              .seed = o.seed});
  d.beta = acceptance_rates(data);
  d.closed = closed_forms(d.beta, o.batch, o.gamma);
  d.steps = run_steps(data, o);
  d.curves = demo_curves(d.steps, d.closed, d.beta, o.gamma);
  const std::filesystem::path path = write_demo(o, d);
  if (o.json) {
    print_demo_json(o, d, path);
  } else if (!quiet()) {
    print_demo_positions(o, d);
    print_demo_summary(o, d, path);
  }
  std::fflush(stdout);
  if (d.steps.disagreements != 0) throw Error("fast path and reference disagree");
}

void setup_demo(CLI::App& app) {
  auto* demo = app.add_subcommand(
      "demo", "Built-in default experiment: verify synthetic batches, write HDF5, print a summary");
  document_exit_statuses(*demo);
  auto o = std::make_shared<DemoOptions>();
  demo->add_option("-o,--out", o->out, "results directory")->capture_default_str();
  demo->add_option("--batch", o->batch, "requests per batch (B)")->capture_default_str();
  demo->add_option("--gamma", o->gamma, "draft tokens per request (γ)")->capture_default_str();
  demo->add_option("--vocab", o->vocab, "vocabulary size (V)")->capture_default_str();
  demo->add_option("--steps", o->steps, "verification steps")->capture_default_str();
  demo->add_option("--draft-noise", o->draft_noise,
                   "logit noise separating draft from target (sets α)")
      ->capture_default_str();
  demo->add_option("--seed", o->seed, "Philox seed")->capture_default_str();
  demo->add_flag("--json", o->json, "print one JSON object (the report below as numbers)");
  demo->callback([o] { run_demo(*o); });
}

const CommandRegistrar kRegistrar{"demo", &setup_demo};

}  // namespace
}  // namespace speclab::cli
