// A sweep's summary.csv as a table for the terminal: the swept parameters and the headline
// metrics of each point (acceptance, emitted per step, tokens/s, measured speedup).
#pragma once

#include <filesystem>
#include <string>
#include <vector>

namespace speclab::experiments {

/// The table of `summary_csv`, one row per point, with the columns of `swept_keys` first.
/// Returns "" when the file cannot be read.
std::string format_summary_table(const std::filesystem::path& summary_csv,
                                 const std::vector<std::string>& swept_keys);

}  // namespace speclab::experiments
