// JSON text through nlohmann::ordered_json (see json.hpp).
#include "core/io/json.hpp"

#include <string_view>

namespace speclab {
namespace {

std::string scalar_text(const Json& value) {
  return value.dump(-1, ' ', false, Json::error_handler_t::replace);
}

std::string json_string(std::string_view text) { return scalar_text(Json(std::string(text))); }

}  // namespace

std::string json_text(const Json& value) {
  if (value.is_object()) {
    std::string text = "{";
    for (auto it = value.begin(); it != value.end(); ++it) {
      if (it != value.begin()) text += ", ";
      text += json_string(it.key());
      text += ": ";
      text += json_text(it.value());
    }
    return text + "}";
  }
  if (value.is_array()) {
    std::string text = "[";
    for (auto it = value.begin(); it != value.end(); ++it) {
      if (it != value.begin()) text += ", ";
      text += json_text(*it);
    }
    return text + "]";
  }
  return scalar_text(value);
}

std::string json_pretty(const Json& value) {
  return value.dump(2, ' ', false, Json::error_handler_t::replace);
}

}  // namespace speclab
