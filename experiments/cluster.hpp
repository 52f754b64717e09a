// Sweeps on a batch cluster (experiments/README.md "Cluster scale"): the Slurm job-array script of
// `speclab slurm`, one array task per shard (`speclab run CONFIG --shard I/N --resume`), and the
// state of a sweep's points across the output directories of its shards (`speclab status`).
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "experiments/sweep.hpp"

namespace speclab::experiments {

struct SlurmOptions {
  std::filesystem::path speclab;  ///< the executable the tasks run (absolute)
  std::filesystem::path config;   ///< the config (made absolute)
  std::vector<std::string> sets;  ///< the --set overrides, passed on to every task
  std::filesystem::path out;      ///< results directory shared by every task
  int64_t array_size = 0;         ///< N shards = N array tasks (0: one per point)
  int64_t jobs = 1;               ///< speclab run --jobs, and the CPUs each task asks for
  std::string partition;          ///< #SBATCH --partition (empty: the cluster's default)
  std::string time;               ///< #SBATCH --time (empty: the partition's default)
  std::string job_name;           ///< #SBATCH --job-name (empty: speclab-<sweep name>)
};

/// Throws InvalidInput unless `time` is one of Slurm's --time forms: M, M:S, H:M:S, D-H, D-H:M,
/// D-H:M:S (digits only).
void check_slurm_time(std::string_view time);

/// The sbatch script of `sweep` under `options`: `#SBATCH --array=1-N` and one
/// `speclab run CONFIG --out OUT --shard $SLURM_ARRAY_TASK_ID/$SLURM_ARRAY_TASK_COUNT --resume`
/// per task (Slurm's task ids run 1..N, the shard numbers of --shard I/N). Every path and value is
/// shell-quoted. Throws InvalidInput for an array size outside [1, points], jobs < 1, a bad
/// --time or a partition or job name that is not a plain word.
std::string slurm_script(const Sweep& sweep, const SlurmOptions& options);

/// The state of one sweep point across the directories given.
enum class PointState { kDone, kPartial, kMissing, kDamaged };
std::string_view point_state_name(PointState state);  ///< "done", "partial", "missing", "damaged"

struct PointStatus {
  int64_t index = 0;
  std::string id;
  int64_t shard = 1;  ///< I of --shard I/N that runs this point
  PointState state = PointState::kMissing;
  std::filesystem::path path;  ///< the file found (empty when missing)
  std::string detail;          ///< why a file is damaged
};

struct SweepStatus {
  std::string name;
  int64_t shards = 1;  ///< N
  std::vector<PointStatus> points;
  int64_t count(PointState state) const;
  bool complete() const { return count(PointState::kDone) == static_cast<int64_t>(points.size()); }
};

/// Looks for each point's OUT/<id>.h5 in every directory: done when one holds it and it reads as
/// that point's result file, damaged when it does not read (or holds another point), partial
/// when only OUT/<id>.h5.partial exists (a task running, or killed), missing otherwise. `shards`
/// is N of the runs' --shard I/N; nullopt infers it from the directories' shard summaries
/// (summary.shard-I-of-N.csv, one N for all), else 1. Throws InvalidInput for a directory that
/// does not exist or shard summaries of different N.
SweepStatus sweep_status(const Sweep& sweep, std::span<const std::filesystem::path> dirs,
                         std::optional<int64_t> shards);

}  // namespace speclab::experiments
