// libFuzzer target for the experiment config loader (experiments/sweep.hpp, config.hpp): any text,
// with any `--set` overrides, must load or throw InvalidInput; a crash, a sanitizer report or
// another exception is a bug, and so is an error that does not name the file. Lines "#set
// KEY=VALUE" of the input (TOML comments, so the rest still parses) are passed as --set overrides
// too. A config that loads must also reproduce itself: each point's resolved config_toml, the text
// a result file keeps, loads again to one point with the same resolved text, and its name keeps the
// default output directory results/NAME inside results/.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

#include "core/base/error.hpp"
#include "experiments/sweep.hpp"

namespace {

// Points checked for the round trip: a sweep may have a million, and a few show a broken writer.
constexpr size_t kRoundTripPoints = 8;

std::vector<std::string> set_lines(std::string_view text) {
  std::vector<std::string> sets;
  constexpr std::string_view kPrefix = "#set ";
  size_t start = 0;
  while (start < text.size()) {
    size_t end = text.find('\n', start);
    if (end == std::string_view::npos) end = text.size();
    const std::string_view line = text.substr(start, end - start);
    if (line.starts_with(kPrefix)) sets.emplace_back(line.substr(kPrefix.size()));
    start = end + 1;
  }
  return sets;
}

[[noreturn]] void fail(std::string_view what, std::string_view detail) {
  std::fprintf(stderr, "config_fuzz: %.*s\n%.*s\n", static_cast<int>(what.size()), what.data(),
               static_cast<int>(detail.size()), detail.data());
  std::abort();
}

void check_round_trip(const speclab::experiments::SweepPoint& point) {
  try {
    const auto again = speclab::experiments::parse_sweep(point.config_toml, "fuzz.toml");
    if (again.points.size() != 1)
      fail("a resolved config loads to several points", point.config_toml);
    if (again.points[0].config_toml != point.config_toml) {
      fail("a resolved config loads to another config",
           point.config_toml + "\n---- loads as ----\n" + again.points[0].config_toml);
    }
  } catch (const speclab::InvalidInput& e) {
    fail("a resolved config does not load", point.config_toml + "\n---- error ----\n" + e.what());
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  const std::vector<std::string> sets = set_lines(text);
  speclab::experiments::Sweep sweep;
  try {
    sweep = speclab::experiments::parse_sweep(text, "fuzz.toml", sets);
  } catch (const speclab::InvalidInput& e) {
    // Every config error names the file (FILE:LINE:COLUMN, or FILE: for the whole sweep).
    if (!std::string_view(e.what()).starts_with("fuzz.toml:"))
      fail("an error without its file", e.what());
    return 0;
  }
  // The name is the default output directory, results/NAME: it must stay one directory there.
  const std::filesystem::path out = std::filesystem::path("results") / sweep.name;
  if (out.parent_path() != "results" || sweep.name == "." || sweep.name == "..") {
    fail("a name that leaves results/", sweep.name);
  }
  for (size_t i = 0; i < sweep.points.size() && i < kRoundTripPoints; ++i) {
    check_round_trip(sweep.points[i]);
  }
  return 0;
}
