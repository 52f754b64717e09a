// `speclab verify --config CONFIG.toml`: distributional equivalence of the configured model pair,
// verifier and sampling against the target's exact law (core/stats/verify_distribution.hpp).
// Exit 0 when no difference is found, 1 when one is, 2 for bad input.
#include <fmt/format.h>

#include <cstdio>
#include <filesystem>
#include <memory>

#include "cli/command.hpp"
#include "core/base/error.hpp"
#include "core/io/hdf5_file.hpp"
#include "core/models/model_registry.hpp"
#include "core/stats/verify_distribution.hpp"
#include "experiments/config.hpp"
#include "experiments/runner.hpp"
#include "experiments/sweep.hpp"

namespace speclab::cli {
namespace {

struct VerifyCliOptions {
  std::string config;
  std::vector<std::string> sets;
  VerifyOptions check;
  std::string out;
  bool json = false;
};

void write_report(const std::filesystem::path& path, const experiments::SweepPoint& point,
                  const VerifyReport& r) {
  if (path.has_parent_path()) std::filesystem::create_directories(path.parent_path());
  Hdf5Writer out(path);
  const int64_t shape[] = {static_cast<int64_t>(r.observed.size())};
  std::vector<int32_t> observed(r.observed.begin(), r.observed.end());
  out.write("observed", std::span<const int32_t>(observed), shape);
  out.write("expected", std::span<const double>(r.expected), shape);
  out.write_string_attribute("schema", "speclab.verify");
  out.write_int64_attribute("schema_version", 1);
  out.write_string_attribute("config_toml", point.config_toml);
  out.write_int64_attribute("pass", r.pass ? 1 : 0);
  out.write_double_attribute("p_value", r.p_value);
  out.write_double_attribute("statistic", r.statistic);
  out.write_int64_attribute("samples", r.samples);
  out.write_int64_attribute("bins", r.bins);
  out.write_int64_attribute("length", r.length);
  out.write_int64_attribute("support", r.support);
  out.write_int64_attribute("draft_exercised", r.draft_exercised ? 1 : 0);
  out.write_double_attribute("epsilon_detectable", r.epsilon_detectable);
  out.write_double_attribute("tv_estimate", r.tv_estimate);
  out.write_double_attribute("tv_upper_99", r.tv_upper);
  out.write_double_attribute("plain_p_value", r.plain_p_value);
  out.commit();
}

void run_verify(const VerifyCliOptions& o) {
  const experiments::Sweep sweep = experiments::load_sweep(o.config, o.sets);
  bool all_pass = true;
  for (const auto& point : sweep.points) {
    const auto& s = point.settings;
    if (!s.speculative()) {
      throw InvalidInput(fmt::format("{}: point {} has no [draft]; verify needs a draft model",
                                     o.config, point.id));
    }
    auto target = make_model(s.target_model);
    auto draft = make_model(s.draft_model);
    const auto prompt = experiments::make_prompts(s, target->vocab()).front();
    const VerifyReport r =
        verify_distribution(*target, *draft, prompt, experiments::decode_config(s, 0), o.check);
    const std::filesystem::path report_path =
        o.out.empty()
            ? std::filesystem::path(point.id + ".verify.h5")
            : (sweep.points.size() == 1 ? std::filesystem::path(o.out)
                                        : std::filesystem::path(o.out) / (point.id + ".verify.h5"));
    write_report(report_path, point, r);
    all_pass = all_pass && r.pass;
    if (o.json) {
      std::printf(
          "{\"point\": \"%s\", \"pass\": %s, \"p_value\": %.6g, \"samples\": %lld, "
          "\"bins\": %lld, \"length\": %lld, \"epsilon_detectable\": %.6g, \"tv_estimate\": "
          "%.6g, \"tv_upper_99\": %.6g, \"plain_p_value\": %.6g, \"support\": %lld, "
          "\"draft_exercised\": %s, \"seconds\": %.3f, \"report\": \"%s\"}\n",
          point.id.c_str(), r.pass ? "true" : "false", r.p_value, static_cast<long long>(r.samples),
          static_cast<long long>(r.bins), static_cast<long long>(r.length), r.epsilon_detectable,
          r.tv_estimate, r.tv_upper, r.plain_p_value, static_cast<long long>(r.support),
          r.draft_exercised ? "true" : "false", r.seconds, report_path.string().c_str());
      continue;
    }
    std::printf("speclab verify: %s (target %s, draft %s, verifier %s)\n", point.id.c_str(),
                s.target_model.c_str(), s.draft_model.c_str(), std::string(s.verifier()).c_str());
    std::printf(
        "  joint law of the first %lld tokens: %lld sequences of positive probability (%lld "
        "outcomes), %lld χ² bins%s\n",
        static_cast<long long>(r.length), static_cast<long long>(r.support),
        static_cast<long long>(r.outcomes), static_cast<long long>(r.bins),
        r.memoised ? "; rows computed once per prefix" : "");
    if (!r.draft_exercised) {
      std::printf(
          "  note: at L = 1 the draft is not exercised (γ_b = min(γ, L − 1) = 0), so this checks "
          "only the target's own sampling; pass --length ≥ 2 (shrinking the support with "
          "sampling.top_k if needed)\n");
    }
    std::printf(
        "  N = %lld samples, p-value %.4g (level %.0e), detects TV ≥ %.4f at power "
        "%.2f\n",
        static_cast<long long>(r.samples), r.p_value, o.check.alpha, r.epsilon_detectable,
        o.check.power);
    std::printf(
        "  TV(observed, exact) = %.4f, 99%% upper bound %.4f; plain decoding control "
        "p-value %.4g\n",
        r.tv_estimate, r.tv_upper, r.plain_p_value);
    if (r.impossible_outcome >= 0) {
      std::printf("  an outcome of probability 0 was sampled (index %lld)\n",
                  static_cast<long long>(r.impossible_outcome));
    }
    std::printf("  verdict: %s (%.1f s); report %s\n",
                r.pass ? "PASS, no difference from the target's distribution"
                       : "FAIL, the output distribution differs from the target's",
                r.seconds, report_path.string().c_str());
  }
  if (!all_pass) throw ExitStatus{1};
}

void setup_verify(CLI::App& app) {
  auto* cmd = app.add_subcommand(
      "verify",
      "Test that speculative decoding's output distribution equals the target's (χ² against "
      "the exact joint law); exit 0 pass, 1 fail");
  auto o = std::make_shared<VerifyCliOptions>();
  cmd->add_option("--config", o->config, "experiment config (TOML)")->required();
  cmd->add_option("--set", o->sets, "override a key, KEY=VALUE (VALUE parsed as TOML)");
  cmd->add_option("--samples", o->check.samples, "samples (0: enough to detect --epsilon)")
      ->capture_default_str();
  cmd->add_option("--epsilon", o->check.epsilon, "TV distance to detect at power 0.99")
      ->capture_default_str();
  cmd->add_option("--length", o->check.length,
                  "tokens per sample (0: the most whose support has ≤ 4096 sequences)")
      ->capture_default_str();
  cmd->add_option("--out", o->out, "report HDF5 (default: POINT_ID.verify.h5)");
  cmd->add_flag("--json", o->json, "print one JSON object per point");
  cmd->callback([o] { run_verify(*o); });
}

const CommandRegistrar kRegistrar{"verify", &setup_verify};

}  // namespace
}  // namespace speclab::cli
