// `speclab validate CONFIG.toml [--set KEY=VALUE]...`: checks a config and every sweep point,
// reporting all errors at once as FILE:LINE:COLUMN: message (exit 2), or the number of points.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "cli/command.hpp"
#include "experiments/sweep.hpp"

namespace speclab::cli {
namespace {

struct ValidateArgs {
  std::string config;
  std::vector<std::string> sets;
};

void validate(const ValidateArgs& args) {
  const experiments::Sweep sweep = experiments::load_sweep(args.config, args.sets);
  std::printf("%s: OK: \"%s\", %zu sweep point%s%s\n", args.config.c_str(), sweep.name.c_str(),
              sweep.points.size(), sweep.points.size() == 1 ? "" : "s",
              sweep.axes.empty() ? "" : fmt::format(" ({})", fmt::join(sweep.axes, " × ")).c_str());
}

void setup_validate(CLI::App& app) {
  auto* cmd = app.add_subcommand("validate", "Check an experiment config and every sweep point");
  auto args = std::make_shared<ValidateArgs>();
  cmd->add_option("config", args->config, "experiment config (TOML)")->required();
  cmd->add_option("--set", args->sets, "override a key, KEY=VALUE (repeatable)");
  cmd->callback([args] { validate(*args); });
}

const CommandRegistrar kRegistrar{"validate", &setup_validate};

}  // namespace
}  // namespace speclab::cli
