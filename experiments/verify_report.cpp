// The `speclab verify` report (verify_report.hpp).
#include "experiments/verify_report.hpp"

#include <fmt/format.h>

#include <vector>

#include "core/base/error.hpp"
#include "core/io/hdf5_file.hpp"

namespace speclab::experiments {
namespace {

constexpr DatasetSpec kDatasets[] = {
    {"observed", "samples", "speculative samples that fell on each outcome"},
    {"expected", "probability", "the exact probability of each outcome under the target"},
    {"expected_count", "samples",
     "samples expected on each outcome under the target: samples × expected"},
};

constexpr AttributeSpec kAttributes[] = {
    {"schema", "\"speclab.verify\""},
    {"schema_version", "the version of this schema the report follows"},
    {"config_toml", "the point's resolved config, every key, as TOML"},
    {"pass", "1 when no difference from the target's law was found, else 0"},
    {"p_value", "the χ² test's p-value of the speculative samples against expected"},
    {"statistic", "the χ² statistic"},
    {"samples", "N, the speculative samples drawn"},
    {"bins", "χ² bins after merging small expected counts"},
    {"length", "tokens per sample L"},
    {"support", "sequences of L tokens of positive exact probability"},
    {"draft_exercised", "1 when the verifier tested at least one draft token, else 0 (vacuous)"},
    {"tested_positions", "draft positions the verifier tested over the N samples"},
    {"epsilon_detectable", "TV distance detected at power 0.99 with N samples"},
    {"tv_estimate", "TV(observed / N, expected)"},
    {"tv_upper_99", "99% upper confidence bound on the true TV distance"},
    {"plain_p_value", "the same test on plain decoding, a control"},
};

void describe(Hdf5Writer& out, std::string_view name) {
  for (const DatasetSpec& d : kDatasets) {
    if (d.name == name) return out.describe(name, d.units, d.description);
  }
  throw Error(fmt::format("dataset '{}' has no entry in the verify report's dataset table", name));
}

}  // namespace

std::span<const DatasetSpec> verify_report_datasets() { return kDatasets; }

std::span<const AttributeSpec> verify_report_attributes() { return kAttributes; }

void write_verify_report(Hdf5Writer& out, const SweepPoint& point, const VerifyReport& r) {
  const int64_t shape[] = {static_cast<int64_t>(r.observed.size())};
  const std::vector<int32_t> observed(r.observed.begin(), r.observed.end());
  std::vector<double> expected_count;
  for (const double p : r.expected) expected_count.push_back(p * static_cast<double>(r.samples));
  out.write("observed", std::span<const int32_t>(observed), shape);
  describe(out, "observed");
  out.write("expected", std::span<const double>(r.expected), shape);
  describe(out, "expected");
  out.write("expected_count", std::span<const double>(expected_count), shape);
  describe(out, "expected_count");
  out.write_attribute("schema", kVerifySchema);
  out.write_attribute<int64_t>("schema_version", kVerifySchemaVersion);
  out.write_attribute("config_toml", point.config_toml);
  out.write_attribute<int64_t>("pass", r.pass ? 1 : 0);
  out.write_attribute<double>("p_value", r.p_value);
  out.write_attribute<double>("statistic", r.statistic);
  out.write_attribute<int64_t>("samples", r.samples);
  out.write_attribute<int64_t>("bins", r.bins);
  out.write_attribute<int64_t>("length", r.length);
  out.write_attribute<int64_t>("support", r.support);
  out.write_attribute<int64_t>("draft_exercised", r.draft_exercised ? 1 : 0);
  out.write_attribute<int64_t>("tested_positions", r.tested_positions);
  out.write_attribute<double>("epsilon_detectable", r.epsilon_detectable);
  out.write_attribute<double>("tv_estimate", r.tv_estimate);
  out.write_attribute<double>("tv_upper_99", r.tv_upper);
  out.write_attribute<double>("plain_p_value", r.plain_p_value);
  out.commit();
}

}  // namespace speclab::experiments
