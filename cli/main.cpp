// speclab: the command-line entry point. Subcommands live in cli/cmd_*.cpp.
#include <fmt/format.h>

#include <algorithm>
#include <cstdio>
#include <exception>

#include "cli/command.hpp"
#include "core/base/error.hpp"

namespace speclab::cli {
std::vector<CommandEntry>& command_registry() {
  static std::vector<CommandEntry> registry;
  return registry;
}
}  // namespace speclab::cli

int main(int argc, char** argv) {
  CLI::App app{
      "speclab: simulation and verification of speculative decoding.\n"
      "Run `speclab demo` for a small experiment that writes HDF5 and prints a summary."};
  app.require_subcommand(1);
  auto& registry = speclab::cli::command_registry();
  std::sort(registry.begin(), registry.end(),
            [](const auto& a, const auto& b) { return a.name < b.name; });
  for (auto& entry : registry) entry.setup(app);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    const int code = app.exit(e);
    return code == 0 ? 0 : 2;
  } catch (const speclab::cli::ExitStatus& status) {
    return status.code;
  } catch (const speclab::InvalidInput& e) {
    std::fprintf(stderr, "speclab: error: %s\n", e.what());
    return 2;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "speclab: internal error: %s\n", e.what());
    return 1;
  }
  return 0;
}
