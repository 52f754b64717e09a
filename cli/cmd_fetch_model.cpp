// `speclab fetch-model NAME [--dir data/models]`: downloads and verifies a model file
// (experiments/fetch_model.hpp). Idempotent: a file already present that verifies is kept.
#include <memory>
#include <string>

#include "cli/command.hpp"
#include "experiments/fetch_model.hpp"

namespace speclab::cli {
namespace {

struct FetchModelOptions {
  std::string name;
  std::string dir = "data/models";
};

void setup_fetch_model(CLI::App& app) {
  auto* cmd = app.add_subcommand(
      "fetch-model", "Download a model file (GGUF) into data/models and verify its SHA-256");
  auto o = std::make_shared<FetchModelOptions>();
  std::string names;
  for (const ModelSource& s : model_sources()) names += (names.empty() ? "" : ", ") + s.name;
  cmd->add_option("name", o->name, "model to fetch: " + names)->required();
  cmd->add_option("--dir", o->dir, "directory for model files")->capture_default_str();
  cmd->callback([o] { fetch_model(find_model_source(o->name), o->dir); });
}

const CommandRegistrar kRegistrar{"fetch-model", &setup_fetch_model};

}  // namespace
}  // namespace speclab::cli
