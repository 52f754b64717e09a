// `speclab expand CONFIG.toml [--set KEY=VALUE]... [--shard I/N]`: lists the sweep points, one per
// line: index, id (the result file's stem) and the swept values.
#include <fmt/format.h>

#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "cli/command.hpp"
#include "cli/json.hpp"
#include "experiments/sweep.hpp"

namespace speclab::cli {
namespace {

struct ExpandArgs {
  std::string config;
  std::vector<std::string> sets;
  std::string shard = "1/1";
  bool json = false;
};

void expand(const ExpandArgs& args) {
  const experiments::Sweep sweep = experiments::load_sweep(args.config, args.sets);
  const experiments::Shard shard = experiments::parse_shard(args.shard);
  const auto points = experiments::shard_points(sweep, shard);
  if (args.json) {
    Json list = Json::array();
    for (const experiments::SweepPoint* p : points) {
      Json values = Json::object();
      for (const auto& v : p->swept) values[v.key] = json_value(v.value);
      list.push_back({{"index", p->index}, {"id", p->id}, {"values", values}});
    }
    print_json_line({{"sweep", sweep.name},
                     {"sweep_points", sweep.points.size()},
                     {"shard", fmt::format("{}/{}", shard.index, shard.count)},
                     {"points", list}});
    return;
  }
  if (!quiet()) {
    std::printf(
        "# %s: %zu of %zu points%s\n", sweep.name.c_str(), points.size(), sweep.points.size(),
        shard.whole() ? "" : fmt::format(" in shard {}/{}", shard.index, shard.count).c_str());
  }
  for (const experiments::SweepPoint* p : points) {
    std::string values;
    for (const auto& v : p->swept) {
      values += fmt::format("  {}={}", v.key, experiments::to_string(v.value));
    }
    std::printf("%lld\t%s%s\n", static_cast<long long>(p->index), p->id.c_str(), values.c_str());
  }
}

void setup_expand(CLI::App& app) {
  auto* cmd = app.add_subcommand("expand", "List the sweep points of a config with their ids");
  document_exit_statuses(*cmd);  // --quiet leaves out the "# NAME: N points" header
  auto args = std::make_shared<ExpandArgs>();
  cmd->add_option("config", args->config, "experiment config (TOML)")->required();
  cmd->add_option("--set", args->sets, "override a key, KEY=VALUE (repeatable)");
  cmd->add_option("--shard", args->shard, "list only shard I of N")->capture_default_str();
  cmd->add_flag("--json", args->json, "print one JSON object: the points with their swept values");
  cmd->callback([args] { expand(*args); });
}

const CommandRegistrar kRegistrar{"expand", &setup_expand};

}  // namespace
}  // namespace speclab::cli
