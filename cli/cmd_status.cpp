// `speclab status CONFIG DIR... [--set KEY=VALUE]... [--shards N] [--json]`: which of a sweep's
// points are done, partial (being written, or left by a killed task) or missing across the
// results directories of its shards, per shard and per point (experiments/README.md "Cluster
// scale"). Exit status 0 when every point is done, 3 otherwise (as `speclab merge`).
#include <fmt/format.h>

#include <cstdio>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "cli/command.hpp"
#include "cli/json.hpp"
#include "experiments/cluster.hpp"
#include "experiments/sweep.hpp"

namespace speclab::cli {
namespace {

namespace fs = std::filesystem;
using experiments::PointState;

constexpr int kIncompleteStatus = 3;

struct StatusArgs {
  std::string config;
  std::vector<std::string> dirs;
  std::vector<std::string> sets;
  int64_t shards = 0;
  bool json = false;
};

void print_json(const experiments::SweepStatus& st) {
  Json list = Json::array();
  for (const auto& p : st.points) {
    list.push_back({{"index", p.index},
                    {"id", p.id},
                    {"shard", p.shard},
                    {"state", experiments::point_state_name(p.state)},
                    {"path", p.path.string()},
                    {"detail", p.detail}});
  }
  print_json_line({{"sweep", st.name},
                   {"points", st.points.size()},
                   {"shards", st.shards},
                   {"done", st.count(PointState::kDone)},
                   {"partial", st.count(PointState::kPartial)},
                   {"missing", st.count(PointState::kMissing)},
                   {"damaged", st.count(PointState::kDamaged)},
                   {"list", list}});
}

void print_text(const experiments::SweepStatus& st) {
  std::printf("sweep '%s': %zu points in %lld shard%s: %lld done, %lld partial, %lld missing%s\n",
              st.name.c_str(), st.points.size(), static_cast<long long>(st.shards),
              st.shards == 1 ? "" : "s", static_cast<long long>(st.count(PointState::kDone)),
              static_cast<long long>(st.count(PointState::kPartial)),
              static_cast<long long>(st.count(PointState::kMissing)),
              st.count(PointState::kDamaged) > 0
                  ? fmt::format(", {} damaged", st.count(PointState::kDamaged)).c_str()
                  : "");
  if (st.shards > 1) {
    for (int64_t shard = 1; shard <= st.shards; ++shard) {
      int64_t n[4] = {0, 0, 0, 0};
      for (const auto& p : st.points) {
        if (p.shard == shard) ++n[static_cast<int>(p.state)];
      }
      std::printf("  shard %lld/%lld: %lld done, %lld partial, %lld missing%s\n",
                  static_cast<long long>(shard), static_cast<long long>(st.shards),
                  static_cast<long long>(n[0]), static_cast<long long>(n[1]),
                  static_cast<long long>(n[2]),
                  n[3] > 0 ? fmt::format(", {} damaged", n[3]).c_str() : "");
    }
  }
  std::printf("  %5s  %-7s  %-7s  %s\n", "index", "shard", "state", "id");
  for (const auto& p : st.points) {
    std::string line =
        fmt::format("  {:>5}  {:<7}  {:<7}  {}", p.index, fmt::format("{}/{}", p.shard, st.shards),
                    experiments::point_state_name(p.state), p.id);
    if (!p.path.empty() && p.state != PointState::kDone) line += "  " + p.path.string();
    if (!p.detail.empty()) line += " (" + p.detail + ")";
    std::printf("%s\n", line.c_str());
  }
}

void status(const StatusArgs& args) {
  const experiments::Sweep sweep = experiments::load_sweep(args.config, args.sets);
  const std::vector<fs::path> dirs(args.dirs.begin(), args.dirs.end());
  const experiments::SweepStatus st = experiments::sweep_status(
      sweep, dirs, args.shards > 0 ? std::optional<int64_t>(args.shards) : std::nullopt);
  if (args.json) {
    print_json(st);
  } else if (!quiet()) {
    print_text(st);
  }
  std::fflush(stdout);
  if (!st.complete()) throw ExitStatus{kIncompleteStatus};
}

void setup_status(CLI::App& app) {
  auto* cmd = app.add_subcommand(
      "status",
      "List a sweep's done, partial and missing points across its shards' results directories");
  document_exit_statuses(*cmd, {{0, "every point is done"}, {3, "some point is not done"}});
  auto args = std::make_shared<StatusArgs>();
  cmd->add_option("config", args->config, "experiment config (TOML)")->required();
  cmd->add_option("dirs", args->dirs, "results directories (the --out of the sweep's runs)")
      ->required();
  cmd->add_option("--set", args->sets, "override a key, KEY=VALUE (as given to the runs)");
  cmd->add_option(
      "--shards", args->shards,
      "N of the runs' --shard I/N (default: from their summary.shard-I-of-N.csv, else 1)");
  cmd->add_flag("--json", args->json, "print the status as JSON");
  cmd->callback([args] { status(*args); });
}

const CommandRegistrar kRegistrar{"status", &setup_status};

}  // namespace
}  // namespace speclab::cli
