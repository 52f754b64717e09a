// `speclab report RESULTS_DIR -o report.html`: one self-contained HTML page of a results directory
// (figures inline as PNG, each sweep's summary table, its resolved config, the machine and its
// instruction sets, the verify verdicts), written by the Python package's speclab.report
// (python/speclab/report.py) under Debian's /usr/bin/python3 with the figures of speclab.plot,
// found as `speclab plot` finds its module (installed: PREFIX/share/speclab/python/).

#include <memory>
#include <string>
#include <vector>

#include "cli/command.hpp"
#include "experiments/project_files.hpp"

namespace speclab::cli {
namespace {

struct ReportOptions {
  std::string results;
  std::string out;
  bool json = false;
};

void run_report(const ReportOptions& o) {
  require_results_directory(o.results);
  std::vector<std::string> command =
      experiments::python_module_command("speclab report", "python3-matplotlib", "speclab.report");
  command.insert(command.end(), {o.results, "-o", o.out});
  if (o.json) command.emplace_back("--json");
  if (quiet()) command.emplace_back("--quiet");
  const int code = experiments::run_helper(command);
  if (code != 0) throw ExitStatus{code == 2 ? 2 : 1};
}

void setup_report(CLI::App& app) {
  auto options = std::make_shared<ReportOptions>();
  CLI::App* command = app.add_subcommand(
      "report",
      "Write one self-contained HTML page of a results directory: the figures inline, each "
      "sweep's summary table and resolved config, the machine and instruction sets, the verify "
      "verdicts");
  document_exit_statuses(*command, {{0, "the page is written"}});
  command->add_option("results", options->results, "results directory")->required();
  command->add_option("-o,--out", options->out, "HTML file to write (its directory is made)")
      ->required();
  command->add_flag("--json", options->json,
                    "print one JSON object: the page, its figures, those not drawn and why");
  command->callback([options] { run_report(*options); });
}

const CommandRegistrar kRegistrar{"report", &setup_report};

}  // namespace
}  // namespace speclab::cli
