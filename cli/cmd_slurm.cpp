// `speclab slurm CONFIG [--set KEY=VALUE]... [--results DIR] [--array-size N] [--partition P]
// [--time T] [--jobs J] [-o SCRIPT] [--json]`: writes the sbatch script that runs a sweep as a
// Slurm job array, one `speclab run --shard I/N --resume` per task, into one results directory
// (experiments/README.md "Cluster scale"). The results directory is created now, so that the tasks'
// logs have a place.
#include <sys/stat.h>

#include <cstdio>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "cli/command.hpp"
#include "cli/json.hpp"
#include "core/base/error.hpp"
#include "core/io/atomic_file.hpp"
#include "experiments/cluster.hpp"
#include "experiments/out_dir.hpp"
#include "experiments/runner.hpp"
#include "experiments/sweep.hpp"

namespace speclab::cli {
namespace {

namespace fs = std::filesystem;

struct SlurmArgs {
  std::string config;
  std::vector<std::string> sets;
  std::string results;
  std::string script;
  int64_t array_size = 0;
  int64_t jobs = 1;
  std::string partition, time, job_name;
  bool json = false;
};

void slurm(const SlurmArgs& args) {
  const experiments::Sweep sweep = experiments::load_sweep(args.config, args.sets);
  experiments::SlurmOptions options;
  std::error_code ec;
  options.speclab = fs::read_symlink("/proc/self/exe", ec);
  if (ec) throw Error("cannot read /proc/self/exe: the path of the speclab executable");
  options.config = fs::absolute(args.config);
  options.sets = args.sets;
  options.out = fs::absolute(args.results.empty() ? experiments::default_out_dir(sweep)
                                                  : fs::path(args.results))
                    .lexically_normal();
  options.array_size = args.array_size;
  options.jobs = args.jobs;
  options.partition = args.partition;
  options.time = args.time;
  options.job_name = args.job_name;
  const bool to_stdout = args.script.empty() || args.script == "-";
  if (to_stdout && args.json) {
    throw InvalidInput("--json needs -o SCRIPT: without it the script itself goes to stdout");
  }
  const std::string script = experiments::slurm_script(sweep, options);
  experiments::prepare_out_dir(options.out, "--results", "results directory");
  if (to_stdout) {
    std::fputs(script.c_str(), stdout);
    return;
  }
  // Written as SCRIPT.partial and renamed, so an earlier script under that name survives a
  // failed write whole.
  try {
    AtomicFile file(args.script);
    file.write(script);
    if (::chmod(partial_path(args.script).c_str(), 0755) != 0) {
      throw IoError("cannot make it executable");
    }
    file.commit();
  } catch (const IoError& e) {
    throw InvalidInput("-o " + args.script + ": cannot write the script (" + e.what() +
                       "); choose another -o");
  }
  if (args.json) {
    print_json_line({{"script", args.script},
                     {"sweep", sweep.name},
                     {"points", sweep.points.size()},
                     {"results", options.out.string()}});
    return;
  }
  if (quiet()) return;
  std::printf("speclab slurm: %s (%zu points) -> %s\n  submit: sbatch %s\n  results: %s\n",
              sweep.name.c_str(), sweep.points.size(), args.script.c_str(), args.script.c_str(),
              options.out.string().c_str());
}

void setup_slurm(CLI::App& app) {
  auto* cmd = app.add_subcommand(
      "slurm",
      "Write the sbatch script that runs a sweep as a Slurm job array (one shard per task, "
      "--resume), then submit it with sbatch and merge with `speclab merge`");
  document_exit_statuses(*cmd);
  auto args = std::make_shared<SlurmArgs>();
  cmd->add_option("config", args->config, "experiment config (TOML)")->required();
  cmd->add_option("--set", args->sets,
                  "override a key, KEY=VALUE (repeatable; passed to each task)");
  cmd->add_option("--results", args->results,
                  "results directory of every task, made now for their logs (default: "
                  "results/<name>)");
  cmd->add_option("--array-size", args->array_size,
                  "array tasks N = shards (default: one per sweep point)");
  cmd->add_option("--jobs", args->jobs, "sweep points per task in parallel (and its CPUs)")
      ->capture_default_str();
  cmd->add_option("--partition", args->partition, "#SBATCH --partition (default: the cluster's)");
  cmd->add_option("--time", args->time, "#SBATCH --time per task, e.g. 30 or 1-12:00:00");
  cmd->add_option("--job-name", args->job_name, "#SBATCH --job-name (default: speclab-<name>)");
  cmd->add_option("-o,--out", args->script, "write the script here (default: stdout)");
  cmd->add_flag("--json", args->json, "print one JSON object: script, points, results directory");
  cmd->callback([args] { slurm(*args); });
}

const CommandRegistrar kRegistrar{"slurm", &setup_slurm};

}  // namespace
}  // namespace speclab::cli
