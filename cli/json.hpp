// The commands' --json output: Json values (core/io/json.hpp) printed on one line of stdout.
#pragma once

#include <cstdio>
#include <string>
#include <variant>

#include "core/io/json.hpp"

namespace speclab::cli {

// Every string, number and layout is core/io/json's (nlohmann::ordered_json): one writer for every
// JSON speclab writes.
using speclab::Json;
using speclab::json_pretty;
using speclab::json_text;

/// One JSON value on its own line of stdout (json_text's layout).
inline void print_json_line(const Json& value) {
  std::fputs((json_text(value) + "\n").c_str(), stdout);
}

/// A bool, integer, number or string (e.g. a swept value) as a Json value.
template <typename Variant>
Json json_value(const Variant& value) {
  return std::visit([](const auto& v) { return Json(v); }, value);
}

}  // namespace speclab::cli
