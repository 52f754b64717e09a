// `speclab merge DIR... -o OUT`: gathers the result files of several run directories (the shards
// of a sweep) into OUT and writes OUT/summary.csv over all of them. A sweep with missing points
// (by the sweep size every result file records) is merged, warned about, and exits 3 unless
// --allow-incomplete.
#include <fmt/format.h>

#include <cstdio>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "cli/command.hpp"
#include "cli/json.hpp"
#include "experiments/merge.hpp"

namespace speclab::cli {
namespace {

struct MergeArgs {
  std::vector<std::string> inputs;
  std::string out;
  bool allow_incomplete = false;
  bool json = false;
};

// Merged, but some sweep lacks points (a shard not run, or not passed to merge).
constexpr int kIncompleteStatus = 3;

void merge(const MergeArgs& args) {
  const std::vector<std::filesystem::path> inputs(args.inputs.begin(), args.inputs.end());
  const experiments::MergeReport report = experiments::merge_results(inputs, args.out);
  if (args.json) {
    print_json_line({{"points", report.files},
                     {"copied", report.copied},
                     {"duplicates", report.duplicates},
                     {"partials_ignored", report.partials},
                     {"summary", report.summary.string()},
                     {"complete", report.incomplete.empty()},
                     {"incomplete", report.incomplete}});
  } else if (!quiet()) {
    std::printf(
        "speclab merge: %lld sweep points (%lld copied, %lld duplicates skipped, %lld "
        "unfinished .partial files ignored)\n  summary: %s\n",
        static_cast<long long>(report.files), static_cast<long long>(report.copied),
        static_cast<long long>(report.duplicates), static_cast<long long>(report.partials),
        report.summary.string().c_str());
  }
  std::fflush(stdout);
  for (const std::string& line : report.incomplete) {
    std::fprintf(stderr, "speclab merge: warning: incomplete: %s\n", line.c_str());
  }
  if (!report.incomplete.empty() && !args.allow_incomplete) {
    std::fprintf(stderr,
                 "speclab merge: the merged summary lacks those points; run their shards and merge "
                 "again, or pass --allow-incomplete to accept a partial merge (exit status 3)\n");
    throw ExitStatus{kIncompleteStatus};
  }
}

void setup_merge(CLI::App& app) {
  auto* cmd = app.add_subcommand(
      "merge", "Merge result directories (e.g. the shards of a sweep) and build their summary");
  document_exit_statuses(*cmd,
                         {{3, "merged, but a sweep lacks points (unless --allow-incomplete)"}});
  auto args = std::make_shared<MergeArgs>();
  cmd->add_option("dirs", args->inputs, "results directories")->required();
  cmd->add_option("-o,--out", args->out, "output directory (may be one of the inputs)")->required();
  cmd->add_flag("--allow-incomplete", args->allow_incomplete,
                "exit 0 even when a sweep's points are missing (otherwise warn and exit 3)");
  cmd->add_flag("--json", args->json,
                "print one JSON object: counts, summary file, missing points");
  cmd->callback([args] { merge(*args); });
}

const CommandRegistrar kRegistrar{"merge", &setup_merge};

}  // namespace
}  // namespace speclab::cli
