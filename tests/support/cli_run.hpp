// Runs the built `speclab` executable (SPECLAB_CLI) as a user would, capturing its output.
#pragma once

#include <gtest/gtest.h>
#include <sys/wait.h>

#include <array>
#include <cstdio>
#include <filesystem>
#include <string>

namespace speclab::testing {

struct CliRun {
  int status = -1;
  std::string output;  ///< stdout and stderr together
};

/// A path in single quotes, for the ARGUMENTS of run_cli.
inline std::string quoted(const std::filesystem::path& path) { return "'" + path.string() + "'"; }

/// Runs `speclab ARGUMENTS` through the shell; quote paths in ARGUMENTS yourself. `output` is
/// stdout and stderr together, or stdout alone with `stdout_only` (stderr is dropped). With
/// `working_directory`, speclab runs there (the test's own directory otherwise).
inline CliRun run_cli(const std::string& arguments, bool stdout_only = false,
                      const std::filesystem::path& working_directory = {}) {
  const std::string cd =
      working_directory.empty() ? std::string() : "cd " + quoted(working_directory) + " && ";
  const std::string command =
      cd + "'" + SPECLAB_CLI + "' " + arguments + (stdout_only ? " 2>/dev/null" : " 2>&1");
  FILE* pipe = popen(command.c_str(), "r");
  if (pipe == nullptr) {
    ADD_FAILURE() << "popen failed for: " << command;
    return {};
  }
  CliRun run;
  std::array<char, 4096> buffer{};
  while (const size_t n = std::fread(buffer.data(), 1, buffer.size(), pipe)) {
    run.output.append(buffer.data(), n);
  }
  const int raw = pclose(pipe);
  run.status = WIFEXITED(raw) ? WEXITSTATUS(raw) : -1;
  return run;
}

}  // namespace speclab::testing
