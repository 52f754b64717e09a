// Merging result directories (see merge.hpp).
#include "experiments/merge.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "core/base/error.hpp"
#include "core/io/atomic_file.hpp"
#include "experiments/results.hpp"

namespace speclab::experiments {
namespace fs = std::filesystem;

namespace {

// "sweep 'NAME' (N points): K merged, missing index 3, 7" when points are missing (the first
// few indices named); nothing when the set is whole or the files predate n_points.
std::vector<std::string> missing_points(const std::string& name, int64_t n_points,
                                        const std::set<int64_t>& indices) {
  if (n_points <= 0 || static_cast<int64_t>(indices.size()) >= n_points) return {};
  constexpr size_t kNamed = 8;
  std::vector<int64_t> missing;
  for (int64_t i = 0; i < n_points && missing.size() < kNamed; ++i) {
    if (!indices.contains(i)) missing.push_back(i);
  }
  const int64_t n_missing = n_points - static_cast<int64_t>(indices.size());
  std::string listed = fmt::format("{}", fmt::join(missing, ", "));
  if (n_missing > static_cast<int64_t>(missing.size())) listed += ", …";
  return {fmt::format("sweep '{}' ({} points): {} merged, {} missing (index {})", name, n_points,
                      indices.size(), n_missing, listed)};
}

}  // namespace

MergeReport merge_results(std::span<const fs::path> inputs, const fs::path& out) {
  if (inputs.empty()) throw InvalidInput("merge: no input directory; expected DIR... -o OUT");
  MergeReport report;
  std::vector<std::string> errors;
  struct Found {
    fs::path path;
    SummaryRow row;
    std::string name;
    int64_t index = 0;
    int64_t n_points = 0;
  };
  std::map<std::string, Found> by_id;
  std::error_code ec;
  // A point's result file while it is written (a killed run leaves it behind).
  const std::string unfinished_point = partial_path(".h5").string();
  for (const fs::path& dir : inputs) {
    if (!fs::is_directory(dir, ec)) {
      errors.push_back(
          fmt::format("{}: {}; expected a results directory", dir.string(),
                      fs::exists(dir, ec) ? "is not a directory" : "no such directory"));
      continue;
    }
    std::vector<fs::path> files;
    for (const auto& entry : fs::directory_iterator(dir, ec)) {
      const std::string name = entry.path().filename().string();
      if (name.ends_with(unfinished_point)) ++report.partials;
      if (entry.is_regular_file(ec) && name.ends_with(".h5")) files.push_back(entry.path());
    }
    if (ec) errors.push_back(fmt::format("{}: cannot list ({})", dir.string(), ec.message()));
    std::sort(files.begin(), files.end());
    for (const fs::path& file : files) {
      try {
        SummaryRow row = read_summary_row(file);
        const std::string id = row.at(0).second;
        if (by_id.contains(id)) {
          ++report.duplicates;
          continue;
        }
        Found found{file, std::move(row), {}, 0, read_sweep_size(file)};
        for (const auto& [column, cell] : found.row) {
          if (column == "name") found.name = cell;
          if (column == "index") found.index = std::stoll(cell);
        }
        by_id.emplace(id, std::move(found));
      } catch (const Error& e) {
        errors.push_back(e.what());
      }
    }
  }
  if (!errors.empty()) {
    throw InvalidInput(fmt::format("merge: {} problem{}; nothing was written:\n{}", errors.size(),
                                   errors.size() == 1 ? "" : "s", fmt::join(errors, "\n")));
  }
  if (by_id.empty()) {
    std::vector<std::string> names;
    for (const fs::path& dir : inputs) names.push_back(dir.string());
    throw InvalidInput(fmt::format("merge: no result files (*.h5) in {}", fmt::join(names, ", ")));
  }
  fs::create_directories(out, ec);
  if (!fs::is_directory(out, ec)) {
    throw InvalidInput(
        fmt::format("-o {}: cannot create the directory; choose another -o", out.string()));
  }
  std::vector<const Found*> found;
  for (const auto& [id, f] : by_id) found.push_back(&f);
  std::sort(found.begin(), found.end(), [](const Found* a, const Found* b) {
    return std::tie(a->name, a->index, a->row.at(0).second) <
           std::tie(b->name, b->index, b->row.at(0).second);
  });
  std::vector<SummaryRow> rows;
  for (const Found* f : found) {
    const fs::path target = out / f->path.filename();
    if (!fs::exists(target, ec)) {
      try {
        copy_file_atomically(f->path, target);
      } catch (const IoError& e) {
        throw InvalidInput(
            fmt::format("merge: {}; the files already copied are complete, rerun "
                        "merge after freeing space",
                        e.what()));
      }
      ++report.copied;
    } else if (!fs::equivalent(target, f->path, ec)) {
      const std::string id = read_result_id(target);
      if (id != f->row.at(0).second) {
        throw InvalidInput(
            fmt::format("merge: {} holds point '{}' but {} has the same file name; "
                        "choose another -o",
                        target.string(), id, f->path.string()));
      }
    }
    rows.push_back(f->row);
  }
  report.files = static_cast<int64_t>(rows.size());
  std::map<std::pair<std::string, int64_t>, std::set<int64_t>> sweeps;  // (name, size) -> indices
  for (const Found* f : found) sweeps[{f->name, f->n_points}].insert(f->index);
  for (const auto& [sweep, indices] : sweeps) {
    for (std::string& line : missing_points(sweep.first, sweep.second, indices)) {
      report.incomplete.push_back(std::move(line));
    }
  }
  report.summary = out / kSummaryFile;
  try {
    write_summary_csv(report.summary, rows);
  } catch (const IoError& e) {
    throw InvalidInput(fmt::format("merge: {}", e.what()));
  }
  return report;
}

}  // namespace speclab::experiments
