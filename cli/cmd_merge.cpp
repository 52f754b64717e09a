// `speclab merge DIR... -o OUT`: gathers the result files of several run directories (the shards
// of a sweep) into OUT and writes OUT/summary.csv over all of them.
#include <cstdio>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "cli/command.hpp"
#include "experiments/merge.hpp"

namespace speclab::cli {
namespace {

struct MergeArgs {
  std::vector<std::string> inputs;
  std::string out;
};

void merge(const MergeArgs& args) {
  const std::vector<std::filesystem::path> inputs(args.inputs.begin(), args.inputs.end());
  const experiments::MergeReport report = experiments::merge_results(inputs, args.out);
  std::printf(
      "speclab merge: %lld sweep points (%lld copied, %lld duplicates skipped, %lld "
      "unfinished .partial files ignored)\n  summary: %s\n",
      static_cast<long long>(report.files), static_cast<long long>(report.copied),
      static_cast<long long>(report.duplicates), static_cast<long long>(report.partials),
      report.summary.string().c_str());
}

void setup_merge(CLI::App& app) {
  auto* cmd = app.add_subcommand(
      "merge", "Merge result directories (e.g. the shards of a sweep) and build their summary");
  auto args = std::make_shared<MergeArgs>();
  cmd->add_option("dirs", args->inputs, "results directories")->required();
  cmd->add_option("-o,--out", args->out, "output directory (may be one of the inputs)")->required();
  cmd->callback([args] { merge(*args); });
}

const CommandRegistrar kRegistrar{"merge", &setup_merge};

}  // namespace
}  // namespace speclab::cli
