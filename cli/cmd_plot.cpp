// `speclab plot RESULTS_DIR -o FIGDIR`: the standard figures of a results directory as PNG, drawn
// by the Python package's speclab.plot (python/speclab/plot.py, the module the notebooks use)
// under Debian's /usr/bin/python3, so the command and the notebooks cannot drift apart.

#include <cstdio>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "cli/command.hpp"
#include "cli/json.hpp"
#include "experiments/project_files.hpp"

namespace speclab::cli {
namespace {

struct PlotOptions {
  std::string results;
  std::string out;
  bool json = false;
};

// {"results", "out", "figures": [PNG paths], "not_drawn": ["NAME: reason"]} from the lines the
// module logs (python/speclab/plot.py render(): "  PATH.png" per figure written, "  not drawn:
// NAME: reason" per figure the results cannot give).
void print_plot_json(const PlotOptions& o, const std::string& log) {
  Json figures = Json::array(), not_drawn = Json::array();
  size_t start = 0;
  while (start < log.size()) {
    size_t end = log.find('\n', start);
    if (end == std::string::npos) end = log.size();
    const std::string_view line = std::string_view(log).substr(start, end - start);
    start = end + 1;
    constexpr std::string_view kNotDrawn = "  not drawn: ";
    if (line.starts_with(kNotDrawn)) {
      not_drawn.push_back(std::string(line.substr(kNotDrawn.size())));
    } else if (line.starts_with("  ") && line.ends_with(".png")) {
      figures.push_back(std::string(line.substr(2)));
    }
  }
  print_json_line(
      {{"results", o.results}, {"out", o.out}, {"figures", figures}, {"not_drawn", not_drawn}});
  std::fflush(stdout);
}

void run_plot(const PlotOptions& o) {
  require_results_directory(o.results);
  // speclab.plot (python/speclab/plot.py; installed: PREFIX/share/speclab/python) prints its own
  // message: 2 for bad input (no runs), 3 when no figure fits the results (it says why for each),
  // 1 for a failure.
  std::vector<std::string> command =
      experiments::python_module_command("speclab plot", "python3-matplotlib", "speclab.plot");
  command.insert(command.end(), {"render", o.results, "-o", o.out});
  if (!o.json && !quiet()) {
    const int code = experiments::run_helper(command);
    if (code != 0) throw ExitStatus{code == 2 || code == 3 ? code : 1};
    return;
  }
  std::string log;  // the module's stdout: the figures and the reasons for those not drawn
  const int code = experiments::run_helper(command, &log);
  if (o.json && (code == 0 || code == 3)) print_plot_json(o, log);
  if (code != 0) throw ExitStatus{code == 2 || code == 3 ? code : 1};
}

void setup_plot(CLI::App& app) {
  auto options = std::make_shared<PlotOptions>();
  CLI::App* command = app.add_subcommand(
      "plot",
      "Render the standard figures of a results directory (a `speclab run` --out directory, a "
      "root of such directories, `speclab verify` reports) as PNG: the figures the sweep's axes "
      "give, and for each one they cannot, why");
  document_exit_statuses(*command, {{0, "at least one figure drawn"},
                                    {3, "no figure fits the results (each is named, with why)"}});
  command->add_option("results", options->results, "results directory")->required();
  command->add_option("-o,--out", options->out, "figure directory (created)")->required();
  command->add_flag("--json", options->json,
                    "print one JSON object: the figures written and those not drawn, with why");
  command->callback([options] { run_plot(*options); });
}

const CommandRegistrar kRegistrar{"plot", &setup_plot};

}  // namespace
}  // namespace speclab::cli
