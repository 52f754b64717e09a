// `speclab plot RESULTS_DIR -o FIGDIR`: the standard figures of a results directory as PNG, drawn
// by the Python package's speclab.plot (python/speclab/plot.py, the module the notebooks use)
// under Debian's /usr/bin/python3, so the command and the notebooks cannot drift apart.
#include <fmt/format.h>
#include <unistd.h>

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

struct PlotOptions {
  std::string results;
  std::string out;
};

// The package folder that holds the plotting module: $SPECLAB_SOURCE/python; else, for an
// installed speclab (PREFIX/bin/speclab), PREFIX/share/speclab/python (cmake/install.cmake); else
// the first python/ above the executable with speclab/plot.py in it (build/python, the source
// tree). speclab.plot needs no compiled extension.
fs::path find_plot_package() {
  const fs::path relative = fs::path("python") / "speclab" / "plot.py";
  if (auto module = experiments::find_project_file(relative)) {
    return module->parent_path().parent_path();
  }
  std::error_code ec;
  const fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  throw InvalidInput(fmt::format(
      "cannot find {} beside the executable {} (PREFIX/share/speclab/{} for an installed speclab) "
      "or above it; reinstall, or set SPECLAB_SOURCE to the speclab source tree",
      relative.string(), ec ? std::string("(unknown)") : exe.string(), relative.string()));
}

void run_plot(const PlotOptions& o) {
  std::error_code ec;
  if (!fs::is_directory(o.results, ec)) {
    throw InvalidInput(fmt::format(
        "results directory {} does not exist; run e.g. `speclab run "
        "experiments/configs/quickstart.toml` first, or pass the --out directory of a run",
        o.results));
  }
  const fs::path package = find_plot_package();
  const std::string python = experiments::python_for_helpers();
  if (access(python.c_str(), X_OK) != 0) {
    throw InvalidInput(
        fmt::format("{} is not an executable Python; speclab plot needs Debian's "
                    "python3 with python3-matplotlib (or set SPECLAB_PYTHON)",
                    python));
  }
  // The script prints its own message: 2 for bad input (no runs), 3 when no figure fits the
  // results (it says why for each), 1 for a failure.
  const char* old_path = std::getenv("PYTHONPATH");
  std::string path = package.string();
  if (old_path != nullptr && *old_path != '\0') path.append(":").append(old_path);
  if (setenv("PYTHONPATH", path.c_str(), 1) != 0) throw Error("cannot set PYTHONPATH");
  const int code =
      experiments::run_helper({python, "-m", "speclab.plot", "render", o.results, "-o", o.out});
  if (code != 0) throw ExitStatus{code == 2 || code == 3 ? code : 1};
}

void setup_plot(CLI::App& app) {
  auto options = std::make_shared<PlotOptions>();
  CLI::App* command = app.add_subcommand(
      "plot",
      "Render the standard figures of a results directory (a `speclab run` --out directory, a "
      "root of such directories, `speclab verify` reports) as PNG: the figures the sweep's axes "
      "give, and for each one they cannot, why. Exit 0, 2 bad input, 3 no figure fits");
  command->add_option("results", options->results, "results directory")->required();
  command->add_option("-o,--out", options->out, "figure directory (created)")->required();
  command->callback([options] { run_plot(*options); });
}

const CommandRegistrar kRegistrar{"plot", &setup_plot};

}  // namespace
}  // namespace speclab::cli
