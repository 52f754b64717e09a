// JSON text, written once. Every JSON speclab writes (the commands' --json output, the machine
// identity, the planner's and the reports' objects) goes through nlohmann::ordered_json, which
// escapes strings — every control character, and invalid UTF-8 replaced by U+FFFD instead of
// thrown, since token texts and paths can hold any bytes — and writes a double as its shortest
// round trip (0.3, not 0.29999999999999999), NaN and ±inf as null. json_text lays a value out on
// one line as speclab always has: {"key": value, "list": [1, 2]}, keys in insertion order.
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>

namespace speclab {

using Json = nlohmann::ordered_json;

/// `value` as one line of JSON text: ", " between members and elements, ": " after keys.
std::string json_text(const Json& value);
/// `value` indented by two spaces per level, one member or element per line, for documents a
/// reader reads whole (`speclab exact`).
std::string json_pretty(const Json& value);
/// An optional value as Json: the value, or null where there is none.
template <class T>
Json json_or_null(const std::optional<T>& value) {
  return value ? Json(*value) : Json(nullptr);
}

}  // namespace speclab
