// base/quoted.h: the exact escapes, and that a quoted string reads back as itself through a JSON
// parser (nlohmann::json) — TOML's basic strings take the same escapes (Config.LayerKeysWith...
// reads them back through toml++).
#include "base/quoted.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

namespace dp {
namespace {

TEST(Quoted, EscapesQuotesBackslashesAndControlCharacters) {
  EXPECT_EQ(quoted_string("plain name"), "\"plain name\"");
  EXPECT_EQ(quoted_string("a\"b\\c"), "\"a\\\"b\\\\c\"");
  EXPECT_EQ(quoted_string(std::string("x\ny\tz\x7F") + '\0'), "\"x\\u000Ay\\u0009z\\u007F\\u0000\"");
  EXPECT_EQ(quoted_string("\xC3\xA9"), "\"\xC3\xA9\"");  // UTF-8 as it is
}

TEST(Quoted, ReadsBackAsItselfAsJson) {
  const std::string s = std::string("k\"\\\n\r\x01\x1F\x7F \xE2\x82\xAC end") + '\0';
  EXPECT_EQ(nlohmann::json::parse(quoted_string(s)).get<std::string>(), s);
}

}  // namespace
}  // namespace dp
