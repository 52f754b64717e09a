// The terminal table of a sweep summary (see summary_table.hpp).
#include "experiments/summary_table.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <fstream>

namespace speclab::experiments {
namespace {

// One CSV record; fields may be double-quoted with "" for a quote.
std::vector<std::string> split_csv(const std::string& line) {
  std::vector<std::string> fields(1);
  bool quoted = false;
  for (size_t i = 0; i < line.size(); ++i) {
    const char c = line[i];
    if (quoted) {
      if (c == '"' && i + 1 < line.size() && line[i + 1] == '"') {
        fields.back() += '"';
        ++i;
      } else if (c == '"') {
        quoted = false;
      } else {
        fields.back() += c;
      }
    } else if (c == '"') {
      quoted = true;
    } else if (c == ',') {
      fields.emplace_back();
    } else {
      fields.back() += c;
    }
  }
  return fields;
}

std::string number(const std::string& text, const char* format) {
  if (text.empty()) return "-";
  char* end = nullptr;
  const double x = std::strtod(text.c_str(), &end);
  return end == text.c_str() ? text : fmt::format(fmt::runtime(format), x);
}

// identical_to_plain as the table says it: every request identical, or not; "-" without one.
std::string identical_text(const std::string& value) {
  char* end = nullptr;
  const double x = std::strtod(value.c_str(), &end);
  if (value.empty() || end == value.c_str() || std::isnan(x)) return "-";
  return x == 1.0 ? "yes" : "no";
}

}  // namespace

std::string format_summary_table(const std::filesystem::path& summary_csv,
                                 const std::vector<std::string>& swept_keys) {
  std::ifstream in(summary_csv);
  std::string line;
  if (!in || !std::getline(in, line)) return "";
  const std::vector<std::string> header = split_csv(line);
  auto column = [&](const std::string& name) -> int {
    const auto it = std::find(header.begin(), header.end(), name);
    return it == header.end() ? -1 : static_cast<int>(it - header.begin());
  };
  struct Column {
    std::string title;
    int index;
    const char* format;                                   // nullptr: text
    std::string (*render)(const std::string&) = nullptr;  // a cell's own text, when set
  };
  std::vector<Column> columns;
  for (const auto& key : swept_keys) columns.push_back({key, column(key), nullptr});
  if (swept_keys.empty()) columns.push_back({"point", column("id"), nullptr});
  columns.push_back({"acceptance", column("acceptance_rate"), "{:.3f}"});
  columns.push_back({"Σmin(p,q)", column("alpha_estimate"), "{:.3f}"});
  columns.push_back({"emitted/step", column("emitted_per_step"), "{:.3f}"});
  columns.push_back({"tokens/s", column("tokens_per_second"), "{:.1f}"});
  columns.push_back({"speedup", column("speedup"), "{:.2f}x"});
  columns.push_back({"end to end", column("end_to_end_speedup"), "{:.2f}x"});
  columns.push_back({"predicted", column("predicted_speedup"), "{:.2f}x"});
  // Whether every request's tokens are the plain baseline's (yes for coupled and sampled-match).
  columns.push_back({"identical to plain", column("identical_to_plain"), nullptr, identical_text});

  std::vector<std::vector<std::string>> rows;
  while (std::getline(in, line)) {
    if (line.empty()) continue;
    const std::vector<std::string> fields = split_csv(line);
    std::vector<std::string> row;
    for (const auto& c : columns) {
      const std::string value =
          c.index >= 0 && c.index < static_cast<int>(fields.size()) ? fields[c.index] : "";
      if (c.render != nullptr) {
        row.push_back(c.render(value));
        continue;
      }
      row.push_back(c.format == nullptr ? (value.empty() ? "-" : value) : number(value, c.format));
    }
    rows.push_back(row);
  }
  // The planner's prediction exists for the pairs it can profile only, and the comparison with
  // plain decoding for points with a baseline: no column of dashes.
  for (const std::string title : {"identical to plain", "predicted"}) {
    const auto at = std::find_if(columns.begin(), columns.end(),
                                 [&](const Column& c) { return c.title == title; });
    const size_t j = static_cast<size_t>(at - columns.begin());
    if (std::all_of(rows.begin(), rows.end(),
                    [&](const std::vector<std::string>& row) { return row[j] == "-"; })) {
      columns.erase(at);
      for (auto& row : rows) row.erase(row.begin() + static_cast<std::ptrdiff_t>(j));
    }
  }
  std::vector<size_t> width(columns.size());
  for (size_t j = 0; j < columns.size(); ++j) {
    width[j] = columns[j].title.size();
    for (const auto& row : rows) width[j] = std::max(width[j], row[j].size());
  }
  std::string table;
  auto emit = [&](const std::vector<std::string>& cells) {
    table += " ";
    for (size_t j = 0; j < cells.size(); ++j) table += fmt::format(" {:>{}}", cells[j], width[j]);
    table += "\n";
  };
  std::vector<std::string> titles;
  for (const auto& c : columns) titles.push_back(c.title);
  emit(titles);
  for (const auto& row : rows) emit(row);
  return table;
}

}  // namespace speclab::experiments
