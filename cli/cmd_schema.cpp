// `speclab schema [--json]`: the schemas of the files speclab writes, with their versions, from the
// tables their writers use (experiments/results.hpp run_datasets(), run_attributes(),
// summary_metrics(); experiments/verify_report.hpp): the run file (speclab.run, whose summary
// metrics are also the columns of summary.csv) and the verify report (speclab.verify).
#include <fmt/format.h>

#include <cstdio>
#include <memory>
#include <span>
#include <string>

#include "cli/command.hpp"
#include "cli/json.hpp"
#include "experiments/results.hpp"
#include "experiments/verify_report.hpp"

namespace speclab::cli {
namespace {

using experiments::AttributeSpec;
using experiments::DatasetSpec;
using experiments::MetricSpec;

std::string_view kind_name(MetricSpec::Kind kind) {
  switch (kind) {
    case MetricSpec::Kind::kInteger:
      return "integer";
    case MetricSpec::Kind::kNumber:
      return "number";
    case MetricSpec::Kind::kText:
      return "text";
  }
  return "text";
}

struct Schema {
  std::string_view name;
  int64_t version;
  std::string_view what;
  std::span<const DatasetSpec> datasets;
  std::span<const AttributeSpec> attributes;
  std::span<const MetricSpec> metrics;  // empty for the verify report
};

std::vector<Schema> schemas() {
  return {
      {experiments::kRunSchema, experiments::kRunSchemaVersion,
       "one HDF5 file per sweep point (speclab run); the metrics are root attributes and "
       "the columns of summary.csv",
       experiments::run_datasets(), experiments::run_attributes(), experiments::summary_metrics()},
      {experiments::kVerifySchema,
       experiments::kVerifySchemaVersion,
       "one HDF5 report per sweep point (speclab verify)",
       experiments::verify_report_datasets(),
       experiments::verify_report_attributes(),
       {}}};
}

void print_json() {
  Json list = Json::array();
  for (const Schema& s : schemas()) {
    Json datasets = Json::array(), attributes = Json::array(), metrics = Json::array();
    for (const DatasetSpec& d : s.datasets) {
      datasets.push_back({{"name", d.name}, {"units", d.units}, {"description", d.description}});
    }
    for (const AttributeSpec& a : s.attributes) {
      attributes.push_back({{"name", a.name}, {"description", a.description}});
    }
    for (const MetricSpec& m : s.metrics) {
      metrics.push_back({{"name", m.name},
                         {"kind", kind_name(m.kind)},
                         {"time_valued", m.time_valued},
                         {"units", m.units},
                         {"description", m.help}});
    }
    list.push_back({{"schema", s.name},
                    {"version", s.version},
                    {"what", s.what},
                    {"datasets", datasets},
                    {"attributes", attributes},
                    {"metrics", metrics}});
  }
  print_json_line({{"schemas", list}});
}

void print_text() {
  for (const Schema& s : schemas()) {
    fmt::print("{} version {}: {}\n  datasets, each with units and description attributes:\n",
               s.name, s.version, s.what);
    for (const DatasetSpec& d : s.datasets) {
      fmt::print("    {:<42} {:<12} {}\n", d.name, d.units, d.description);
    }
    fmt::print("  root attributes:\n");
    for (const AttributeSpec& a : s.attributes) {
      fmt::print("    {:<42} {}\n", a.name, a.description);
    }
    if (!s.metrics.empty()) {
      fmt::print("  summary metrics (root attributes, summary.csv columns; * time-valued):\n");
      for (const MetricSpec& m : s.metrics) {
        fmt::print("    {:<42} {:<7}{} {:<12} {}\n", m.name, kind_name(m.kind),
                   m.time_valued ? "*" : " ", m.units, m.help);
      }
    }
    fmt::print("\n");
  }
}

void setup_schema(CLI::App& app) {
  auto* cmd = app.add_subcommand(
      "schema",
      "Print the schemas of the run file and the verify report with their versions: every "
      "dataset with its units, every attribute, every summary metric (docs/hdf5.md)");
  document_exit_statuses(*cmd);
  auto json = std::make_shared<bool>(false);
  cmd->add_flag("--json", *json, "print one JSON object");
  cmd->callback([json] { *json ? print_json() : print_text(); });
}

const CommandRegistrar kRegistrar{"schema", &setup_schema};

}  // namespace
}  // namespace speclab::cli
