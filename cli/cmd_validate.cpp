// `speclab validate CONFIG.toml [--set KEY=VALUE]...`: checks a config and every sweep point,
// reporting all errors at once as FILE:LINE:COLUMN: message (exit 2), or the number of points.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "cli/command.hpp"
#include "cli/json.hpp"
#include "experiments/sweep.hpp"

namespace speclab::cli {
namespace {

struct ValidateArgs {
  std::string config;
  std::vector<std::string> sets;
  bool json = false;
};

void validate(const ValidateArgs& args) {
  const experiments::Sweep sweep = experiments::load_sweep(args.config, args.sets);
  if (args.json) {
    print_json_line({{"config", args.config},
                     {"valid", true},
                     {"name", sweep.name},
                     {"points", sweep.points.size()},
                     {"axes", sweep.axes}});
    return;
  }
  if (quiet()) return;
  std::printf("%s: OK: \"%s\", %zu sweep point%s%s\n", args.config.c_str(), sweep.name.c_str(),
              sweep.points.size(), sweep.points.size() == 1 ? "" : "s",
              sweep.axes.empty() ? "" : fmt::format(" ({})", fmt::join(sweep.axes, " × ")).c_str());
}

void setup_validate(CLI::App& app) {
  auto* cmd = app.add_subcommand("validate", "Check an experiment config and every sweep point");
  document_exit_statuses(*cmd,
                         {{0, "the config and every sweep point are valid"},
                          {2, "they are not: every error as FILE:LINE:COLUMN: message on stderr"}});
  auto args = std::make_shared<ValidateArgs>();
  cmd->add_option("config", args->config, "experiment config (TOML)")->required();
  cmd->add_option("--set", args->sets, "override a key, KEY=VALUE (repeatable)");
  cmd->add_flag("--json", args->json, "print one JSON object: name, points, axes");
  cmd->callback([args] { validate(*args); });
}

const CommandRegistrar kRegistrar{"validate", &setup_validate};

}  // namespace
}  // namespace speclab::cli
