// Slurm job-array scripts and the state of a sharded sweep (see cluster.hpp).
#include "experiments/cluster.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <regex>
#include <set>

#include "core/base/error.hpp"
#include "core/io/atomic_file.hpp"
#include "experiments/results.hpp"
#include "experiments/runner.hpp"

namespace speclab::experiments {
namespace fs = std::filesystem;

namespace {

// POSIX-shell single quoting: 'it'\''s' for it's.
std::string shell_quote(std::string_view text) {
  std::string quoted = "'";
  for (const char c : text) {
    if (c == '\'') {
      quoted += "'\\''";
    } else {
      quoted += c;
    }
  }
  return quoted + "'";
}

// An #SBATCH line is split by sbatch itself, not by a shell: its values cannot be quoted.
void check_word(std::string_view option, std::string_view value) {
  static const std::regex kWord("[A-Za-z0-9_.+-]+");
  if (!std::regex_match(value.begin(), value.end(), kWord)) {
    throw InvalidInput(fmt::format(
        "{} '{}': expected a plain word (letters, digits, '_', '.', '+', '-')", option, value));
  }
}

}  // namespace

void check_slurm_time(std::string_view time) {
  // sbatch(1) --time: "minutes", "minutes:seconds", "hours:minutes:seconds", "days-hours",
  // "days-hours:minutes" and "days-hours:minutes:seconds".
  static const std::regex kTime(R"(\d+(:\d+){0,2}|\d+-\d+(:\d+){0,2})");
  if (!std::regex_match(time.begin(), time.end(), kTime)) {
    throw InvalidInput(fmt::format(
        "--time '{}': expected one of Slurm's forms M, M:S, H:M:S, D-H, D-H:M or D-H:M:S, e.g. "
        "--time 30 or --time 1-12:00:00",
        time));
  }
}

std::string slurm_script(const Sweep& sweep, const SlurmOptions& options) {
  const auto points = static_cast<int64_t>(sweep.points.size());
  const int64_t tasks = options.array_size == 0 ? points : options.array_size;
  if (tasks < 1 || tasks > points) {
    throw InvalidInput(
        fmt::format("--array-size {}: expected 1 to {} (the sweep's points; one task runs "
                    "shard I of N, the points whose index i has i mod N = I-1)",
                    options.array_size, points));
  }
  if (options.jobs < 1) {
    throw InvalidInput(fmt::format("--jobs {}: expected at least 1", options.jobs));
  }
  if (!options.partition.empty()) check_word("--partition", options.partition);
  if (!options.time.empty()) check_slurm_time(options.time);
  const std::string job_name =
      options.job_name.empty() ? "speclab-" + sweep.name : options.job_name;
  check_word("--job-name", job_name);
  const std::string out = options.out.string();
  if (out.find_first_of(" \t\n%") != std::string::npos) {
    throw InvalidInput(
        fmt::format("--results '{}': the task logs' #SBATCH --output line cannot hold whitespace "
                    "or '%'; choose "
                    "another results directory",
                    out));
  }

  std::string s = "#!/bin/bash\n";
  s += fmt::format(
      "# Sweep '{}' ({} points) as a Slurm job array of {} tasks, written by `speclab slurm`.\n"
      "# Task I runs shard I/{} (the points whose index i has i mod {} = I-1) into one shared\n"
      "# results directory; a task that is requeued or resubmitted skips its finished points\n"
      "# (--resume). Submit with `sbatch SCRIPT`, follow with `speclab status`, and when every\n"
      "# task has finished:\n"
      "#   {} merge {} -o {}\n",
      sweep.name, points, tasks, tasks, tasks, shell_quote(options.speclab.string()),
      shell_quote(out), shell_quote(out));
  s += fmt::format("#SBATCH --job-name={}\n", job_name);
  s += fmt::format("#SBATCH --array=1-{}\n", tasks);
  s += "#SBATCH --ntasks=1\n";
  s += fmt::format("#SBATCH --cpus-per-task={}\n", options.jobs);
  if (!options.partition.empty()) s += fmt::format("#SBATCH --partition={}\n", options.partition);
  if (!options.time.empty()) s += fmt::format("#SBATCH --time={}\n", options.time);
  s += fmt::format("#SBATCH --output={}/slurm-%A_%a.out\n", out);
  s += "set -euo pipefail\n";
  s += fmt::format("exec {} run {}", shell_quote(options.speclab.string()),
                   shell_quote(options.config.string()));
  for (const std::string& set : options.sets) s += " --set " + shell_quote(set);
  s += fmt::format(
      " --out {} --shard \"$SLURM_ARRAY_TASK_ID/$SLURM_ARRAY_TASK_COUNT\" --resume --jobs {}\n",
      shell_quote(out), options.jobs);
  return s;
}

std::string_view point_state_name(PointState state) {
  switch (state) {
    case PointState::kDone:
      return "done";
    case PointState::kPartial:
      return "partial";
    case PointState::kMissing:
      return "missing";
    case PointState::kDamaged:
      return "damaged";
  }
  return "?";
}

int64_t SweepStatus::count(PointState state) const {
  return std::count_if(points.begin(), points.end(),
                       [state](const PointStatus& p) { return p.state == state; });
}

SweepStatus sweep_status(const Sweep& sweep, std::span<const fs::path> dirs,
                         std::optional<int64_t> shards) {
  if (dirs.empty()) throw InvalidInput("status: no results directory; expected CONFIG DIR...");
  std::error_code ec;
  std::set<int64_t> counts;
  static const std::regex kShardSummary(R"(summary\.shard-\d+-of-(\d+)\.csv)");
  for (const fs::path& dir : dirs) {
    if (!fs::is_directory(dir, ec)) {
      throw InvalidInput(fmt::format(
          "{}: {}; expected a results directory (the --out of the sweep's runs)", dir.string(),
          fs::exists(dir, ec) ? "is not a directory" : "no such directory"));
    }
    for (const auto& entry : fs::directory_iterator(dir, ec)) {
      std::smatch match;
      const std::string file = entry.path().filename().string();
      if (std::regex_match(file, match, kShardSummary)) counts.insert(std::stoll(match[1]));
    }
  }
  SweepStatus status;
  status.name = sweep.name;
  if (shards) {
    if (*shards < 1) throw InvalidInput(fmt::format("--shards {}: expected at least 1", *shards));
    status.shards = *shards;
  } else if (counts.size() > 1) {
    throw InvalidInput(
        fmt::format("the directories hold shard summaries of {} different shard counts "
                    "(summary.shard-I-of-N.csv); name N with --shards",
                    counts.size()));
  } else if (counts.size() == 1) {
    status.shards = *counts.begin();
  }
  for (const SweepPoint& point : sweep.points) {
    PointStatus p;
    p.index = point.index;
    p.id = point.id;
    p.shard = point.index % status.shards + 1;
    for (const fs::path& dir : dirs) {
      const fs::path path = point_path(dir, point);
      if (fs::exists(path, ec)) {
        p.path = path;
        try {
          const std::string id = read_result_id(path);
          if (id == point.id) {
            p.state = PointState::kDone;
            p.detail.clear();
            break;
          }
          p.state = PointState::kDamaged;
          p.detail = fmt::format("holds point '{}'", id);
        } catch (const Error& e) {
          p.state = PointState::kDamaged;
          p.detail = e.what();
        }
      } else if (p.state == PointState::kMissing && fs::exists(partial_path(path), ec)) {
        p.state = PointState::kPartial;
        p.path = partial_path(path);
      }
    }
    status.points.push_back(std::move(p));
  }
  return status;
}

}  // namespace speclab::experiments
