// `speclab run CONFIG.toml [--set KEY=VALUE]... [--out DIR] [--shard I/N] [--resume] [--jobs N]`:
// runs a sweep into one HDF5 file per point plus a summary table (docs/architecture.md
// "experiments/"). SIGINT or SIGTERM stops between batches, keeps every finished point, removes the
// unfinished ones' .partial files, and then ends the process by that signal.
#include <fmt/format.h>

#include <atomic>
#include <csignal>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "cli/command.hpp"
#include "cli/json.hpp"
#include "experiments/runner.hpp"
#include "experiments/summary_table.hpp"
#include "experiments/sweep.hpp"

namespace speclab::cli {
namespace {

using experiments::RunOptions;

struct RunArgs {
  std::string config;
  std::vector<std::string> sets;
  std::string out;
  std::string shard = "1/1";
  bool resume = false;
  int64_t jobs = 1;
  bool json = false;
};

std::atomic<bool> g_stop{false};
volatile std::sig_atomic_t g_signal = 0;

extern "C" void on_stop_signal(int signal) {
  g_signal = signal;
  g_stop.store(true);
}

// Installs the stop handlers for the lifetime of a run; a second signal kills at once
// (SA_RESETHAND), which --resume also recovers from.
class StopSignals {
 public:
  StopSignals() {
    struct sigaction action {};
    action.sa_handler = on_stop_signal;
    sigemptyset(&action.sa_mask);
    action.sa_flags = SA_RESETHAND;
    sigaction(SIGINT, &action, &old_int_);
    sigaction(SIGTERM, &action, &old_term_);
  }
  ~StopSignals() {
    sigaction(SIGINT, &old_int_, nullptr);
    sigaction(SIGTERM, &old_term_, nullptr);
  }

 private:
  struct sigaction old_int_ {};
  struct sigaction old_term_ {};
};

void run(const RunArgs& args) {
  const experiments::Sweep sweep = experiments::load_sweep(args.config, args.sets);
  RunOptions options;
  options.shard = experiments::parse_shard(args.shard);
  options.out =
      args.out.empty() ? experiments::default_out_dir(sweep) : std::filesystem::path(args.out);
  options.resume = args.resume;
  options.jobs = args.jobs;
  options.stop = &g_stop;
  if (quiet() || args.json) options.progress.out = nullptr;
  const int64_t in_shard =
      static_cast<int64_t>(experiments::shard_points(sweep, options.shard).size());
  const bool text = !quiet() && !args.json;
  if (text) {
    std::printf(
        "speclab run: %s, %lld of %zu sweep points%s -> %s\n", sweep.name.c_str(),
        static_cast<long long>(in_shard), sweep.points.size(),
        options.shard.whole()
            ? ""
            : fmt::format(" (shard {}/{})", options.shard.index, options.shard.count).c_str(),
        options.out.string().c_str());
    std::fflush(stdout);
  }
  experiments::RunReport report;
  {
    const StopSignals signals;
    report = experiments::run_sweep(sweep, options);
  }
  if (args.json) {
    print_json_line(
        {{"sweep", sweep.name},
         {"out", options.out.string()},
         {"shard", fmt::format("{}/{}", options.shard.index, options.shard.count)},
         {"points", report.points},
         {"ran", report.ran},
         {"skipped", report.skipped},
         {"removed_partials", report.removed_partials},
         {"interrupted", g_signal != 0},
         {"summary", report.summary.empty() ? Json(nullptr) : Json(report.summary.string())}});
  } else if (text) {
    std::printf(
        "  ran %lld, skipped %lld already finished%s\n", static_cast<long long>(report.ran),
        static_cast<long long>(report.skipped),
        report.removed_partials > 0
            ? fmt::format(", removed {} unfinished .partial file(s)", report.removed_partials)
                  .c_str()
            : "");
    if (!report.summary.empty()) {
      std::printf("  summary: %s\n\n%s", report.summary.string().c_str(),
                  experiments::format_summary_table(report.summary, sweep.swept_keys).c_str());
    }
  }
  std::fflush(stdout);
  if (g_signal != 0) {
    const int signal = g_signal;
    std::fprintf(stderr,
                 "speclab: interrupted by %s: %lld of %lld points finished and kept in %s; rerun "
                 "with --resume to run the rest\n",
                 signal == SIGINT ? "SIGINT" : "SIGTERM",
                 static_cast<long long>(report.ran + report.skipped),
                 static_cast<long long>(report.points), options.out.string().c_str());
    std::fflush(stderr);
    std::signal(signal, SIG_DFL);
    std::raise(signal);
  }
}

void setup_run(CLI::App& app) {
  auto* cmd = app.add_subcommand("run",
                                 "Run an experiment config: one HDF5 file per sweep point "
                                 "and a summary.csv (see experiments/README.md)");
  document_exit_statuses(
      *cmd, {{0, "every point of the shard is finished"},
             {130,
              "stopped by SIGINT (143: SIGTERM); the finished points are kept, --resume "
              "runs the rest"}});
  auto args = std::make_shared<RunArgs>();
  cmd->add_option("config", args->config, "experiment config (TOML)")->required();
  cmd->add_option("--set", args->sets,
                  "override a key, KEY=VALUE with VALUE in TOML (repeatable), e.g. "
                  "--set decode.gamma=8 or --set sweep.decode.gamma=[1,2]");
  cmd->add_option("-o,--out", args->out, "results directory (default: results/<name>)");
  cmd->add_option("--shard", args->shard,
                  "run shard I of N: the points whose index i has i mod N = I-1")
      ->capture_default_str();
  cmd->add_flag("--resume", args->resume,
                "skip finished points (and clean up .partial files of a killed run)");
  cmd->add_option("--jobs", args->jobs, "sweep points run in parallel, one worker thread each")
      ->capture_default_str();
  cmd->add_flag("--json", args->json,
                "print one JSON object: points ran and skipped, summary file");
  cmd->callback([args] { run(*args); });
}

const CommandRegistrar kRegistrar{"run", &setup_run};

}  // namespace
}  // namespace speclab::cli
