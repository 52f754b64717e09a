// `speclab merge` (docs/hdf5.md): gathers the result files of several output
// directories (the shards of one sweep run on many machines) into one directory and builds the
// summary table over all of them.
#pragma once

#include <cstdint>
#include <filesystem>
#include <span>
#include <string>
#include <vector>

namespace speclab::experiments {

struct MergeReport {
  int64_t files = 0;       ///< distinct sweep points in the merged summary
  int64_t copied = 0;      ///< files copied into the output directory
  int64_t duplicates = 0;  ///< files whose id was already taken (the first one is kept)
  int64_t partials = 0;    ///< unfinished .partial files ignored
  std::filesystem::path summary;
  /// One line per sweep whose points are not all present (by the sweep size each result file
  /// records, root attribute n_points), e.g. "sweep 'tiny' (4 points): 3 merged, missing index
  /// 3"; empty when every sweep is complete.
  std::vector<std::string> incomplete;
};

/// Reads every `*.h5` result file in the input directories (not recursively), copies those not
/// already in `out` there (atomically), and writes `out/summary.csv`, rows sorted by (name, index,
/// id). Every unreadable or foreign file is reported at once as InvalidInput, before anything is
/// written. A sweep with missing points is still merged and listed in `incomplete`.
MergeReport merge_results(std::span<const std::filesystem::path> inputs,
                          const std::filesystem::path& out);

}  // namespace speclab::experiments
