// Unit tests of core/io/json, the one writer of every JSON speclab prints: the one-line layout,
// escaping (control characters, quotes, invalid UTF-8), and numbers (shortest round trip, a double
// stays a double, NaN and infinities as null). Expected texts are written from RFC 8259.
#include "core/io/json.hpp"

#include <gtest/gtest.h>

#include <cstdint>
#include <limits>
#include <string>

namespace speclab {
namespace {

TEST(Json, OneLineLayoutKeepsInsertionOrder) {
  const Json value = {{"z", 1}, {"a", Json::array({1, 2})}, {"m", {{"k", true}}}, {"n", nullptr}};
  EXPECT_EQ(json_text(value), R"({"z": 1, "a": [1, 2], "m": {"k": true}, "n": null})");
  EXPECT_EQ(json_text(Json::object()), "{}");
  EXPECT_EQ(json_text(Json::array()), "[]");
}

TEST(Json, StringsAreEscapedAndInvalidUtf8Replaced) {
  // RFC 8259 §7: '"' and '\' are escaped, every control character below 0x20 too; the byte 0xFF
  // is no UTF-8, so it becomes U+FFFD (EF BF BD) rather than an exception.
  EXPECT_EQ(json_text(Json(std::string("a\"b\\c"))), R"("a\"b\\c")");
  EXPECT_EQ(json_text(Json(std::string("tab\there\x01"))), R"("tab\there\u0001")");
  EXPECT_EQ(json_text(Json(std::string("\xff"))), "\"\xef\xbf\xbd\"");
  EXPECT_EQ(json_text(Json(std::string("γ"))), "\"γ\"");  // valid UTF-8 passes through
}

TEST(Json, NumbersAreShortestRoundTripsAndNonFiniteIsNull) {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const double inf = std::numeric_limits<double>::infinity();
  EXPECT_EQ(json_text(Json(0.3)), "0.3");
  EXPECT_EQ(json_text(Json(0.1 + 0.2)), "0.30000000000000004");  // the double 0.1 + 0.2 is not 0.3
  EXPECT_EQ(json_text(Json(64.0)), "64.0");                      // a double stays a double
  EXPECT_EQ(json_text(Json(int64_t{1} << 60)), "1152921504606846976");
  EXPECT_EQ(json_text(Json::array({nan, inf, -inf})), "[null, null, null]");
}

TEST(Json, PrettyIndentsByTwo) {
  EXPECT_EQ(json_pretty({{"a", 1}, {"b", {{"c", "d"}}}}),
            "{\n  \"a\": 1,\n  \"b\": {\n    \"c\": \"d\"\n  }\n}");
}

}  // namespace
}  // namespace speclab
