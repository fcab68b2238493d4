// Tests base/utf8.h against RFC 3629's definition: the boundary characters of each length pass,
// overlong forms, surrogates, code points above U+10FFFF, lone or missing continuation bytes fail,
// and the valid prefix ends at the first bad byte.
#include <gtest/gtest.h>

#include <string>

#include "base/utf8.h"

namespace dp {
namespace {

TEST(Utf8, BoundaryCharactersOfEachLengthAreValid) {
  EXPECT_TRUE(utf8_valid(""));
  EXPECT_TRUE(utf8_valid("plain ascii \x7f"));
  EXPECT_TRUE(utf8_valid("\xC2\x80\xDF\xBF"));                      // U+0080, U+07FF
  EXPECT_TRUE(utf8_valid("\xE0\xA0\x80\xED\x9F\xBF\xEE\x80\x80"));  // U+0800, U+D7FF, U+E000
  EXPECT_TRUE(utf8_valid("\xEF\xBF\xBF\xF0\x90\x80\x80\xF4\x8F\xBF\xBF"));  // U+FFFF, U+10000, U+10FFFF
  EXPECT_TRUE(utf8_valid("r\xC3\xA9sum\xC3\xA9 \xE2\x82\xAC \xF0\x9F\x98\x80"));  // é € 😀
}

TEST(Utf8, InvalidSequencesAreRefused) {
  EXPECT_FALSE(utf8_valid("x\xB7"));              // a lone continuation byte
  EXPECT_FALSE(utf8_valid("\xC0\xAF"));           // overlong '/'
  EXPECT_FALSE(utf8_valid("\xC1\xBF"));           // overlong U+007F
  EXPECT_FALSE(utf8_valid("\xE0\x9F\xBF"));       // overlong U+07FF
  EXPECT_FALSE(utf8_valid("\xF0\x8F\xBF\xBF"));   // overlong U+FFFF
  EXPECT_FALSE(utf8_valid("\xED\xA0\x80"));       // surrogate U+D800
  EXPECT_FALSE(utf8_valid("\xED\xBF\xBF"));       // surrogate U+DFFF
  EXPECT_FALSE(utf8_valid("\xF4\x90\x80\x80"));   // U+110000
  EXPECT_FALSE(utf8_valid("\xF5\x80\x80\x80"));   // lead byte F5
  EXPECT_FALSE(utf8_valid("\xFF"));
  EXPECT_FALSE(utf8_valid("\xE2\x82"));           // truncated at the end
  EXPECT_FALSE(utf8_valid("\xE2\x41\x82"));       // a non-continuation inside
}

TEST(Utf8, TheValidPrefixEndsAtTheFirstBadCharacter) {
  EXPECT_EQ(utf8_valid_prefix("ab\xC3\xA9" "c\xB7" "de"), 5u);
  EXPECT_EQ(utf8_valid_prefix("\xE2\x82"), 0u);
  const std::string nul("a\0b", 3);  // NUL is a valid character
  EXPECT_EQ(utf8_valid_prefix(nul), 3u);
}

}  // namespace
}  // namespace dp
