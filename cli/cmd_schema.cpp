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
  std::string out = "{\"schemas\": [";
  bool first_schema = true;
  for (const Schema& s : schemas()) {
    std::string datasets, attributes, metrics;
    for (const DatasetSpec& d : s.datasets) {
      datasets += fmt::format("{}{{\"name\": {}, \"units\": {}, \"description\": {}}}",
                              datasets.empty() ? "" : ", ", json_string(d.name),
                              json_string(d.units), json_string(d.description));
    }
    for (const AttributeSpec& a : s.attributes) {
      attributes +=
          fmt::format("{}{{\"name\": {}, \"description\": {}}}", attributes.empty() ? "" : ", ",
                      json_string(a.name), json_string(a.description));
    }
    for (const MetricSpec& m : s.metrics) {
      metrics += fmt::format(
          "{}{{\"name\": {}, \"kind\": {}, \"time_valued\": {}, \"units\": {}, "
          "\"description\": {}}}",
          metrics.empty() ? "" : ", ", json_string(m.name), json_string(kind_name(m.kind)),
          json_bool(m.time_valued), json_string(m.units), json_string(m.help));
    }
    out += fmt::format(
        "{}{{\"schema\": {}, \"version\": {}, \"what\": {}, \"datasets\": [{}], \"attributes\": "
        "[{}], \"metrics\": [{}]}}",
        first_schema ? "" : ", ", json_string(s.name), s.version, json_string(s.what), datasets,
        attributes, metrics);
    first_schema = false;
  }
  std::printf("%s]}\n", out.c_str());
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
