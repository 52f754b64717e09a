// JSON text for the commands' --json output: strings escaped, numbers that are not finite as null
// (core/io/json.hpp writes both).
#pragma once

#include <fmt/format.h>

#include <cmath>
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
using speclab::json_string;
using speclab::json_text;

inline const char* json_bool(bool v) { return v ? "true" : "false"; }

/// A bool, integer, number or string (e.g. a swept value) as JSON.
template <typename Variant>
std::string json_scalar(const Variant& value) {
  return std::visit(
      [](const auto& v) -> std::string {
        using T = std::decay_t<decltype(v)>;
        if constexpr (std::is_same_v<T, bool>) {
          return json_bool(v);
        } else if constexpr (std::is_same_v<T, std::string>) {
          return json_string(v);
        } else if constexpr (std::is_floating_point_v<T>) {
          return json_number(v);
        } else {
          return fmt::format("{}", v);
        }
      },
      value);
}

}  // namespace speclab::cli
