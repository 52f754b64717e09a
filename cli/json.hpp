// JSON text for the commands' --json output: strings escaped, numbers that are not finite as null.
#pragma once

#include <fmt/format.h>

#include <cmath>
#include <string>
#include <string_view>
#include <type_traits>
#include <variant>

namespace speclab::cli {

inline std::string json_string(std::string_view text) {
  std::string s = "\"";
  for (const char c : text) {
    if (c == '"' || c == '\\') {
      s += '\\';
      s += c;
    } else if (static_cast<unsigned char>(c) < 0x20) {
      s += fmt::format("\\u{:04x}", static_cast<int>(c));
    } else {
      s += c;
    }
  }
  return s + "\"";
}

/// The shortest text that reads back as the same double: 0.3, not 0.29999999999999999.
inline std::string json_number(double v) {
  return std::isfinite(v) ? fmt::format("{}", v) : "null";
}

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
