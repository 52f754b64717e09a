// `speclab models`: every registered model name (core/models/model_registry.hpp) with its
// vocabulary and what it is, for the --target and --draft options of `bench decode` and the
// target.model and draft.model keys of configs.
#include <fmt/format.h>

#include <algorithm>
#include <memory>

#include "cli/command.hpp"
#include "cli/json.hpp"
#include "core/models/model_registry.hpp"

namespace speclab::cli {
namespace {

void list_models(bool json) {
  const std::vector<ModelInfo> models = model_catalog();
  if (json) {
    Json list = Json::array();
    for (const ModelInfo& m : models) {
      list.push_back({{"name", m.name}, {"vocab", m.vocab}, {"description", m.description}});
    }
    print_json_line({{"models", list}});
    return;
  }
  size_t width = 0;
  for (const ModelInfo& m : models) width = std::max(width, m.name.size());
  fmt::print("{:<{}}  {:>6}  {}\n", "model", width, "V", "what");
  for (const ModelInfo& m : models) {
    fmt::print("{:<{}}  {:>6}  {}\n", m.name, width, m.vocab, m.description);
  }
  if (quiet()) return;
  fmt::print(
      "\nA target and its draft need the same V. docs/models.md describes "
      "them.\n");
}

void setup_models(CLI::App& app) {
  auto* cmd = app.add_subcommand(
      "models", "List the registered models (names for --target/--draft and *.model keys)");
  document_exit_statuses(*cmd);
  auto json = std::make_shared<bool>(false);
  cmd->add_flag("--json", *json, "print one JSON object: every model's name, V and description");
  cmd->callback([json] { list_models(*json); });
}

const CommandRegistrar kRegistrar{"models", &setup_models};

}  // namespace
}  // namespace speclab::cli
