// The report `speclab verify` writes for each sweep point (schema "speclab.verify", docs/hdf5.md):
// the observed counts of each outcome beside its exact probability and its expected count, and the
// test's verdict and numbers as root attributes. The tables below are what the writer writes and
// what `speclab schema` prints.
#pragma once

#include <cstdint>
#include <span>
#include <string_view>

#include "core/equivalence/verify_distribution.hpp"
#include "experiments/results.hpp"
#include "experiments/sweep.hpp"

namespace speclab {
class Hdf5Writer;
}

namespace speclab::experiments {

inline constexpr std::string_view kVerifySchema = "speclab.verify";
/// 2: expected_count beside expected (the probabilities).
inline constexpr int64_t kVerifySchemaVersion = 2;

/// Every dataset of a verify report, with the units and description written on it.
std::span<const DatasetSpec> verify_report_datasets();
/// Every root attribute of a verify report.
std::span<const AttributeSpec> verify_report_attributes();

/// Writes the report of `point` into `out` and commits it; throws IoError on failure.
void write_verify_report(Hdf5Writer& out, const SweepPoint& point, const VerifyReport& report);

}  // namespace speclab::experiments
