// The `speclab` command line: every subcommand registers itself here from its own file, so
// adding a command never touches main.cpp.
#pragma once

#include <CLI/CLI.hpp>
#include <functional>
#include <initializer_list>
#include <string>
#include <string_view>
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

/// The conventions every command follows (README.md "Commands"):
///   -q, --quiet  on every command (main adds it): no progress and no human-readable report;
///                errors and warnings still go to stderr, and what --json, -o or a listing asks
///                for is still written, so that the exit status and those are the whole answer;
///   --json       on every command that reports: one JSON document on stdout;
///   -o, --out    on every command that writes a file or a directory;
///   the exit statuses in every command's --help (document_exit_statuses).
/// tests/cli/conventions_cli_test.cpp walks every command for them.
bool quiet();

/// Throws InvalidInput unless `results` is a directory, saying how to make one (the results
/// argument of `speclab plot` and `speclab report`).
void require_results_directory(const std::string& results);

/// One exit status of a command and what it means.
struct ExitMeaning {
  int code;
  std::string_view meaning;
};

/// What exit status 1 means for every command that gives it no meaning of its own: main's mapping
/// of an error that is not InvalidInput (cli/main.cpp).
inline constexpr std::string_view kInternalError =
    "an internal error, never bad input: a bug (e.g. a fast path that disagrees with the "
    "reference, a device kernel that reports an error) or a system call that failed after the "
    "checks passed; the message says what failed";

/// Sets the --help footer that lists the command's exit statuses: 0, 1 and 2 with their general
/// meanings (done; kInternalError; bad input or usage, an unwritable output included) unless
/// `specific` gives them its own words, and every other status `specific` names (e.g. 3). Each
/// status a command names is one it returns: tests/cli/conventions_cli_test.cpp reaches every one.
void document_exit_statuses(CLI::App& command, std::initializer_list<ExitMeaning> specific = {});

/// Registers a subcommand at static-initialisation time:
///   static const speclab::cli::CommandRegistrar kRegistrar{"exact", &setup_exact};
struct CommandRegistrar {
  CommandRegistrar(std::string name, CommandSetup setup) {
    command_registry().push_back({std::move(name), std::move(setup)});
  }
};

}  // namespace speclab::cli
