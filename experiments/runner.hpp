// The experiment runner (docs/architecture.md "experiments/"): runs a shard of a sweep's points,
// each into its own result file, in N worker threads with their own model instances; skips finished
// points under --resume; stops cleanly between batches when asked (SIGINT); writes the summary
// table.
#pragma once

#include <atomic>
#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "experiments/progress.hpp"
#include "experiments/sweep.hpp"

namespace speclab::experiments {

struct RunOptions {
  std::filesystem::path out;  ///< results directory (created when missing)
  Shard shard;
  bool resume = false;  ///< skip finished points instead of refusing a directory that holds them
  int64_t jobs = 1;     ///< worker threads, each with its own models
  /// Set (e.g. by a signal handler) to stop between batches: the running points' .partial files
  /// are removed, finished points stay. May be nullptr.
  const std::atomic<bool>* stop = nullptr;
  Progress::Options progress = Progress::for_stderr();
};

struct RunReport {
  int64_t points = 0;             ///< points in this shard
  int64_t skipped = 0;            ///< already finished (--resume)
  int64_t ran = 0;                ///< finished by this run
  int64_t removed_partials = 0;   ///< stale .partial files of killed runs removed (--resume)
  bool interrupted = false;       ///< stopped before every point was finished
  std::filesystem::path summary;  ///< the summary file written (empty if none)
};

/// results/<name>.
std::filesystem::path default_out_dir(const Sweep& sweep);
/// OUT/<id>.h5.
std::filesystem::path point_path(const std::filesystem::path& out, const SweepPoint& point);
/// "summary.csv" for a whole sweep, "summary.shard-I-of-N.csv" for a shard (merge combines them).
std::string summary_file_name(const Shard& shard);

/// The prompts of a point's requests: `sequences` prompts of `prompt_length` tokens, uniform
/// random tokens or held-out corpus text, determined by the point's seed; or, for a workload,
/// conversation j mod n of it in the target's chat template (whatever its length).
std::vector<std::vector<int32_t>> make_prompts(const RunSettings& settings, int64_t vocab);

/// Runs the shard's points that are not finished and writes the summary over the finished ones.
/// Bad input (an output directory that cannot be written or already holds this sweep's results
/// without --resume, a corrupt result file under --resume, a full disk) throws InvalidInput; the
/// points finished before an error are kept.
RunReport run_sweep(const Sweep& sweep, const RunOptions& options);

}  // namespace speclab::experiments
