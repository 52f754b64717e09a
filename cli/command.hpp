// The `speclab` command line: every subcommand registers itself here from its own file, so
// adding a command never touches main.cpp.
#pragma once

#include <CLI/CLI.hpp>
#include <functional>
#include <string>
#include <vector>

namespace speclab::cli {

/// Adds a subcommand (and its options) to the app. The callback it installs runs the command;
/// it throws speclab::InvalidInput for bad input (exit 2) and other errors for failures (exit 1).
using CommandSetup = std::function<void(CLI::App& app)>;

struct CommandEntry {
  std::string name;
  CommandSetup setup;
};

std::vector<CommandEntry>& command_registry();

/// Thrown by a command that finished normally but must exit with a non-zero status (e.g. a
/// verification that found a difference): main prints nothing more and returns `code`.
struct ExitStatus {
  int code = 0;
};

/// Registers a subcommand at static-initialisation time:
///   static const speclab::cli::CommandRegistrar kRegistrar{"exact", &setup_exact};
struct CommandRegistrar {
  CommandRegistrar(std::string name, CommandSetup setup) {
    command_registry().push_back({std::move(name), std::move(setup)});
  }
};

}  // namespace speclab::cli
