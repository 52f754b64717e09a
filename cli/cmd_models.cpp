// `speclab models`: every registered model name (core/models/model_registry.hpp) with its
// vocabulary and what it is, for the --target and --draft options of `bench decode` and the
// target.model and draft.model keys of configs.
#include <fmt/format.h>

#include <algorithm>
#include <memory>

#include "cli/command.hpp"
#include "core/models/model_registry.hpp"

namespace speclab::cli {
namespace {

void list_models() {
  const std::vector<ModelInfo> models = model_catalog();
  size_t width = 0;
  for (const ModelInfo& m : models) width = std::max(width, m.name.size());
  fmt::print("{:<{}}  {:>6}  {}\n", "model", width, "V", "what");
  for (const ModelInfo& m : models) {
    fmt::print("{:<{}}  {:>6}  {}\n", m.name, width, m.vocab, m.description);
  }
  fmt::print(
      "\nA target and its draft need the same V. README.md \"Models and decoding\" describes "
      "them.\n");
}

void setup_models(CLI::App& app) {
  auto* cmd = app.add_subcommand(
      "models", "List the registered models (names for --target/--draft and *.model keys)");
  cmd->callback([] { list_models(); });
}

const CommandRegistrar kRegistrar{"models", &setup_models};

}  // namespace
}  // namespace speclab::cli
