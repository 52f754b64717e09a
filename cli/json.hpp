// JSON text for the commands' --json output: strings escaped, numbers that are not finite as null
// (core/io/json.hpp writes both).
#pragma once

#include <fmt/format.h>

#include <cmath>
#include <cstdio>
#include <string>
#include <string_view>
#include <type_traits>
#include <variant>

#include "core/io/json.hpp"

namespace speclab::cli {

// Strings and numbers are written by core/io/json (nlohmann::ordered_json): one escaper, one
// number format for every JSON speclab writes.
using speclab::Json;
using speclab::json_number;
using speclab::json_pretty;
using speclab::json_string;
using speclab::json_text;

/// One JSON value on its own line of stdout (json_text's layout).
inline void print_json_line(const Json& value) {
  std::fputs((json_text(value) + "\n").c_str(), stdout);
}

inline const char* json_bool(bool v) { return v ? "true" : "false"; }

/// A bool, integer, number or string (e.g. a swept value) as a Json value.
template <typename Variant>
Json json_value(const Variant& value) {
  return std::visit([](const auto& v) { return Json(v); }, value);
}

}  // namespace speclab::cli
