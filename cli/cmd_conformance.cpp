// `speclab conformance ...`: is a speculative sampler speclab did not write lossless? Runs the
// Python package's conformance test (python/speclab/conformance/, docs/python.md) with the
// build's package on the path, passing every argument through and returning its exit status
// (0 conforms, 1 does not conform or is broken, 2 bad usage, a sampler that crashes or one that
// breaks the interface).
#include <fmt/format.h>

#include <cstdlib>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "cli/command.hpp"
#include "core/base/error.hpp"
#include "experiments/project_files.hpp"

namespace speclab::cli {
namespace {

namespace fs = std::filesystem;

// Whether PACKAGE (a python/speclab folder) is importable with its compiled extension.
bool holds_extension(const fs::path& package) {
  std::error_code ec;
  if (!fs::exists(package / "__init__.py", ec)) return false;
  for (const auto& entry : fs::directory_iterator(package, ec)) {
    if (entry.path().extension() == ".so") return true;
  }
  return false;
}

void run_conformance(const std::vector<std::string>& arguments) {
  const std::string python = experiments::python_for_helpers();
  // The build's package (build/python for build/bin/speclab), else the one the interpreter
  // imports by itself (pip install .).
  if (const auto package =
          experiments::find_project_file(fs::path("python") / "speclab", holds_extension)) {
    const char* old_path = std::getenv("PYTHONPATH");
    std::string path = package->parent_path().string();
    if (old_path != nullptr && *old_path != '\0') path.append(":").append(old_path);
    if (setenv("PYTHONPATH", path.c_str(), 1) != 0) throw Error("cannot set PYTHONPATH");
  } else if (experiments::run_helper({python, "-c",
                                      "import sys\ntry:\n import speclab._speclab\n"
                                      "except Exception:\n sys.exit(1)"}) != 0) {
    std::error_code ec;
    const fs::path exe = fs::read_symlink("/proc/self/exe", ec);
    throw InvalidInput(fmt::format(
        "speclab conformance needs the Python package: built beside the executable {} (a folder "
        "python/speclab holding __init__.py and the compiled extension, which the build makes "
        "when pybind11 is found: Debian's pybind11-dev), or installed for {} with `pip install .`",
        ec ? std::string("(unknown)") : exe.string(), python));
  }
  std::vector<std::string> args = {python, "-m", "speclab.conformance"};
  args.insert(args.end(), arguments.begin(), arguments.end());
  const int code = experiments::run_helper(args);
  // A sampler that kills the interpreter counts as the test's "a sampler that crashes" (2).
  if (code != 0) throw ExitStatus{code <= 2 ? code : 2};
}

void setup_conformance(CLI::App& app) {
  CLI::App* command = app.add_subcommand(
      "conformance",
      "Test a speculative sampler speclab did not write for losslessness, and its acceptance "
      "against token-level speculative sampling's, through the interface it has (--interface "
      "probs, uniforms, seeds, draft, logits, tree or engine; python3 -m speclab.conformance, "
      "every argument, --help included, goes to it). Exit 0 conforms, 1 does not conform or is "
      "broken, 2 bad usage, a crashing sampler or one that breaks the interface");
  command->prefix_command();
  command->set_help_flag();
  command->callback([command] { run_conformance(command->remaining()); });
}

const CommandRegistrar kRegistrar{"conformance", &setup_conformance};

}  // namespace
}  // namespace speclab::cli
