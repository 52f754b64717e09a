// `speclab verify --config CONFIG.toml`: distributional equivalence of the configured model pair,
// verifier and sampling against the target's exact law (core/equivalence/verify_distribution.hpp).
// Exit 0 when no difference is found, 1 when one is, 2 for bad input, 3 when the check was
// vacuous (no draft token tested, so only the target's sampling was checked) unless
// --allow-vacuous. Progress goes to stderr as `speclab run`'s does (experiments/progress.hpp).
#include <fmt/format.h>

#include <cstdio>
#include <filesystem>
#include <memory>

#include "cli/command.hpp"
#include "cli/json.hpp"
#include "core/base/error.hpp"
#include "core/equivalence/verify_distribution.hpp"
#include "core/io/hdf5_file.hpp"
#include "core/models/model_registry.hpp"
#include "experiments/config.hpp"
#include "experiments/out_dir.hpp"
#include "experiments/progress.hpp"
#include "experiments/runner.hpp"
#include "experiments/sweep.hpp"
#include "experiments/verify_report.hpp"

namespace speclab::cli {
namespace {

struct VerifyCliOptions {
  std::string config;
  std::vector<std::string> sets;
  VerifyOptions check;
  std::string out;
  bool json = false;
  bool allow_vacuous = false;
};

// A check whose draft never proposed a token tested only the target's own sampling.
constexpr int kVacuousStatus = 3;

void print_json(const experiments::SweepPoint& point, const VerifyReport& r,
                const std::filesystem::path& report_path) {
  print_json_line({{"point", point.id},
                   {"pass", r.pass},
                   {"p_value", r.p_value},
                   {"samples", r.samples},
                   {"bins", r.bins},
                   {"length", r.length},
                   {"epsilon_detectable", r.epsilon_detectable},
                   {"tv_estimate", r.tv_estimate},
                   {"tv_upper_99", r.tv_upper},
                   {"plain_p_value", r.plain_p_value},
                   {"support", r.support},
                   {"outcomes", r.outcomes},
                   {"draft_exercised", r.draft_exercised},
                   {"tested_positions", r.tested_positions},
                   {"seconds", r.seconds},
                   {"report", report_path.string()}});
}

void print_text(const experiments::SweepPoint& point, const VerifyReport& r,
                const VerifyCliOptions& o, const std::filesystem::path& report_path) {
  const auto& s = point.settings;
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
        "  vacuous: the draft is not exercised (no draft token was tested; at L = 1, γ_b = "
        "min(γ, L − 1) = 0), so this checks only the target's own sampling; pass --length ≥ 2 "
        "(shrinking the support with sampling.top_k if needed)%s\n",
        o.allow_vacuous ? "" : "; exit status 3 unless --allow-vacuous");
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

void run_verify(const VerifyCliOptions& o) {
  const experiments::Sweep sweep = experiments::load_sweep(o.config, o.sets);
  const bool several = sweep.points.size() > 1;
  // A bad --out fails now, not after minutes of sampling.
  if (several && !o.out.empty()) {
    experiments::prepare_out_dir(o.out, "--out", "report directory");
  } else if (const std::filesystem::path parent = std::filesystem::path(o.out).parent_path();
             !parent.empty() && !std::filesystem::exists(parent)) {
    // One point's --out FILE: its directory is made, as `run --out DIR` makes DIR.
    experiments::prepare_out_dir(parent, "--out", "report's directory");
  }
  experiments::Progress::Options progress_options = experiments::Progress::for_stderr();
  if (quiet()) progress_options.out = nullptr;
  experiments::Progress progress(static_cast<int64_t>(sweep.points.size()), 0, progress_options);
  VerifyOptions check = o.check;
  bool planned = false;  // the point's samples are known only once its support is
  check.progress = [&](const VerifyProgress& p) {
    if (!planned) progress.add_work(p.planned_tokens);
    planned = true;
    progress.add(p.tokens, p.accepted_positions, p.tested_positions);
  };
  bool all_pass = true, all_exercised = true;
  for (const auto& point : sweep.points) {
    const auto& s = point.settings;
    if (!s.speculative()) {
      throw InvalidInput(fmt::format("{}: point {} has no [draft]; verify needs a draft model",
                                     o.config, point.id));
    }
    auto target = make_model(s.target_model);
    auto draft = make_model(s.draft_model);
    const auto prompt = experiments::make_prompts(s, target->vocab()).front();
    const std::filesystem::path report_path =
        o.out.empty() ? std::filesystem::path(point.id + ".verify.h5")
                      : (several ? std::filesystem::path(o.out) / (point.id + ".verify.h5")
                                 : std::filesystem::path(o.out));
    Hdf5Writer report(report_path);  // opened first, so that an unwritable place fails at once
    planned = false;
    const std::shared_ptr<const VocabBridge> bridge =
        crosses_vocabularies(s.decode.verifier)
            ? model_vocab_bridge(s.target_model, target->vocab(), s.draft_model, draft->vocab())
            : nullptr;
    check.bridge = bridge.get();
    const VerifyReport r =
        verify_distribution(*target, *draft, prompt, experiments::decode_config(s, 0), check);
    progress.point_finished(0, 0);
    experiments::write_verify_report(report, point, r);
    all_pass = all_pass && r.pass;
    all_exercised = all_exercised && r.draft_exercised;
    progress.clear();
    if (o.json) {
      print_json(point, r, report_path);
    } else if (!quiet()) {
      print_text(point, r, o, report_path);
    }
    std::fflush(stdout);
  }
  progress.finish();
  if (!all_pass) throw ExitStatus{1};
  if (!all_exercised && !o.allow_vacuous) throw ExitStatus{kVacuousStatus};
}

void setup_verify(CLI::App& app) {
  auto* cmd = app.add_subcommand(
      "verify",
      "Test that speculative decoding's output distribution equals the target's (χ² against "
      "the exact joint law)");
  document_exit_statuses(*cmd,
                         {{0, "pass: no difference from the target's distribution found"},
                          {1, "fail: the output distribution differs from the target's"},
                          {3, "vacuous: the draft was never exercised (unless --allow-vacuous)"}});
  auto o = std::make_shared<VerifyCliOptions>();
  cmd->add_option("config,--config", o->config, "experiment config (TOML), positional or --config")
      ->required();
  cmd->add_option("--set", o->sets, "override a key, KEY=VALUE (VALUE parsed as TOML)");
  cmd->add_option("--samples", o->check.samples, "samples (0: enough to detect --epsilon)")
      ->capture_default_str();
  cmd->add_option("--epsilon", o->check.epsilon, "TV distance to detect at power 0.99")
      ->capture_default_str();
  cmd->add_option("--length", o->check.length,
                  "tokens per sample (0: the most whose support has ≤ 4096 sequences)")
      ->capture_default_str();
  cmd->add_option("-o,--out", o->out, "report HDF5 (default: POINT_ID.verify.h5)");
  cmd->add_flag("--json", o->json, "print one JSON object per point");
  cmd->add_flag("--allow-vacuous", o->allow_vacuous,
                "exit 0 even when no draft token was tested (e.g. --length 1)");
  cmd->callback([o] { run_verify(*o); });
}

const CommandRegistrar kRegistrar{"verify", &setup_verify};

}  // namespace
}  // namespace speclab::cli
