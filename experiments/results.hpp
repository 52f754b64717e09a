// Result files (docs/hdf5.md): one HDF5 file per sweep point (schema
// "speclab.run", documented in docs/hdf5.md) streamed batch by batch into NAME.h5.partial
// and committed by rename; and the summary table, one CSV row per point, built from those files.
#pragma once

#include <cstdint>
#include <filesystem>
#include <limits>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/decode/decode.hpp"
#include "experiments/sweep.hpp"

namespace speclab {
class Hdf5Writer;
}

namespace speclab::experiments {

inline constexpr std::string_view kRunSchema = "speclab.run";
/// 2: steps/request; position/acceptance_conditional (was position/acceptance_rate) and
/// position/acceptance_marginal. 3: the prompt pass timed apart (prompt_tokens, prefill_seconds
/// and decode_seconds per point, batch and request); tokens_per_second and speedup are decode
/// rates, end_to_end_speedup includes the prompt pass. Versions 1 and 2 are still read.
inline constexpr int64_t kRunSchemaVersion = 3;
inline constexpr std::string_view kSummaryFile = "summary.csv";

/// Facts about the build and machine recorded in every file.
struct RunMetadata {
  std::string git_commit;  ///< the commit the binary was built from (build_info.hpp)
  std::string host;
  std::string hdf5_version;
  std::string speclab_version;
  std::string library_versions;  ///< "hdf5 1.10.8; toml++ 3.3.0; fmt 9.1.0"
};
/// Computed once per process.
const RunMetadata& run_metadata();

/// The machine a result was measured on, as root attributes (core/probe/machine.hpp):
/// `cpu_model`, `build_isa`, `cpu_isa`, `threads`, `omp_wait_policy`.
void write_machine_attributes(Hdf5Writer& file);

/// Current UTC time as ISO-8601, e.g. "2026-01-31T12:00:00Z".
std::string utc_now();

/// A summary metric: a root attribute of every result file and a column of summary.csv.
struct MetricSpec {
  std::string_view name;
  enum class Kind { kInteger, kNumber, kText } kind;
  bool time_valued;        ///< differs between reruns of the same config and seed
  std::string_view units;  ///< written beside the metric as root attribute units.NAME
  std::string_view help;
};
std::span<const MetricSpec> summary_metrics();

/// A dataset of a run file with the `units` and `description` attributes it carries.
struct DatasetSpec {
  std::string_view name, units, description;
};
/// Every dataset a run file may hold (docs/hdf5.md).
std::span<const DatasetSpec> run_datasets();

/// A root attribute of a result file that is not a summary metric.
struct AttributeSpec {
  std::string_view name, description;
};
/// The root attributes of a run file besides summary_metrics(); `param.KEY` stands for one
/// attribute per swept key.
std::span<const AttributeSpec> run_attributes();

/// The request of every request-step of a batch (steps/request): the index into the point's
/// requests (sequences/length), `first_request` being the batch's first. Steps come in (step,
/// request) order over the requests still running, and a request runs until it has emitted its
/// tokens, which rebuilds the order exactly; throws Error when the step log and the sequences
/// disagree.
std::vector<int32_t> step_requests(const DecodeResult& result, int64_t first_request);

/// Sums of the DecodeMetrics of a point's batches.
struct PointTotals {
  int64_t sequences = 0, steps = 0, tokens = 0, accepted = 0, prompt_tokens = 0;
  std::vector<int64_t> position_reached, position_accepted, position_offered, histogram;
  int64_t residual_fallbacks = 0, tested_positions = 0, accepted_positions = 0, accepted_bytes = 0;
  double alpha_sum_min = 0.0;
  double coupled_sum = 0.0, coupled_bound_sum = 0.0, sampled_match_sum = 0.0;
  int64_t identical_to_plain = 0;  ///< requests whose tokens equal the baseline's
  ModelStats target, draft;
  double verify_seconds = 0.0, prefill_seconds = 0.0, decode_seconds = 0.0;
  int64_t baseline_tokens = 0;
  double baseline_prefill_seconds = 0.0, baseline_decode_seconds = 0.0;
  ModelStats baseline_target;  ///< the baseline's target calls while decoding

  void add(const DecodeMetrics& metrics);
  void add_baseline(const DecodeMetrics& metrics);
};

/// Streams one sweep point's results into PATH.partial; commit() writes the fixed-size curves and
/// the summary attributes and renames the file onto PATH. Destroying an uncommitted writer (an
/// error, an interrupt) removes PATH.partial, so PATH is either absent or complete.
class PointWriter {
 public:
  /// Throws InvalidInput when the directory is missing, IoError when the file cannot be made.
  PointWriter(const std::filesystem::path& path, const SweepPoint& point, int64_t n_points);
  ~PointWriter();
  PointWriter(const PointWriter&) = delete;
  PointWriter& operator=(const PointWriter&) = delete;

  /// One batch of requests decoded with seed `seed`.
  void add_batch(int64_t batch, uint64_t seed, std::span<const std::vector<int32_t>> prompts,
                 const DecodeResult& result);
  /// The plain-decoding baseline of the same batch (decode.baseline), and the batch's own
  /// result `run`, whose tokens are compared with the baseline's (identical_to_plain).
  void add_baseline_batch(const DecodeResult& result, const DecodeResult& run);
  const PointTotals& totals() const { return totals_; }
  /// The planner's prediction to record beside the measured speedup (NaN when not set).
  void set_predicted_speedup(double speedup) { predicted_speedup_ = speedup; }
  /// Writes the curves and attributes and commits; throws IoError on failure.
  void commit();

 private:
  const SweepPoint& point_;
  std::unique_ptr<Hdf5Writer> file_;
  PointTotals totals_;
  double predicted_speedup_ = std::numeric_limits<double>::quiet_NaN();
};

/// One row of the summary: column name -> cell text (empty for a missing or NaN value).
using SummaryRow = std::vector<std::pair<std::string, std::string>>;

/// Reads a result file's summary row: id, index, name, every resolved config key (dotted), every
/// summary metric, file. Throws InvalidInput naming the file when it is not a speclab.run file.
SummaryRow read_summary_row(const std::filesystem::path& path);

/// The id attribute of a finished result file; throws InvalidInput naming the file (and saying
/// what is wrong) when it is missing, corrupt or of another schema.
std::string read_result_id(const std::filesystem::path& path);

/// The size of the sweep a result file belongs to (root attribute n_points), or 0 when the
/// file does not record it.
int64_t read_sweep_size(const std::filesystem::path& path);

/// Writes rows as CSV (header = the union of columns in first-seen order) atomically: PATH.partial,
/// fsync, rename. Throws IoError on failure.
void write_summary_csv(const std::filesystem::path& path, std::span<const SummaryRow> rows);

/// Writes text to PATH via PATH.partial + fsync + rename; throws IoError naming the path.
void write_file_atomically(const std::filesystem::path& path, std::string_view text);
/// Copies a file the same way.
void copy_file_atomically(const std::filesystem::path& from, const std::filesystem::path& to);

}  // namespace speclab::experiments
