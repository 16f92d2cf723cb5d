// Printable (base/printable.h): user text in a message stays one line of plain text.
#include "stagecraft/base/printable.h"

#include <string>

#include <gtest/gtest.h>

namespace stagecraft {
namespace {

TEST(PrintableTest, KeepsPrintableAsciiAndValidUtf8) {
  EXPECT_EQ(Printable("pipeline.ranks: expected an integer, got 'x'"), "pipeline.ranks: expected an integer, got 'x'");
  EXPECT_EQ(Printable("2\xC2\xB5s"), "2\xC2\xB5s");                 // µ, two bytes
  EXPECT_EQ(Printable("\xE2\x86\x92"), "\xE2\x86\x92");             // →, three bytes
  EXPECT_EQ(Printable("\xF0\x9F\x98\x80"), "\xF0\x9F\x98\x80");     // an emoji, four bytes
  EXPECT_EQ(Printable(""), "");
}

TEST(PrintableTest, EscapesControlBytes) {
  EXPECT_EQ(Printable("a\nb\rc\td"), "a\\nb\\rc\\td");
  EXPECT_EQ(Printable(std::string("\x1b[31mred\x1b[0m")), "\\x1b[31mred\\x1b[0m");
  EXPECT_EQ(Printable(std::string("nul\0byte", 8)), "nul\\x00byte");
  EXPECT_EQ(Printable("\x7f"), "\\x7f");
}

TEST(PrintableTest, EscapesBytesOutsideValidUtf8) {
  EXPECT_EQ(Printable("\xff\xfe"), "\\xff\\xfe");
  EXPECT_EQ(Printable("\xC0\x80"), "\\xc0\\x80");          // an overlong NUL
  EXPECT_EQ(Printable("\xED\xA0\x80"), "\\xed\\xa0\\x80");  // a UTF-16 surrogate
  EXPECT_EQ(Printable("\xF4\x90\x80\x80"), "\\xf4\\x90\\x80\\x80");  // above U+10FFFF
  EXPECT_EQ(Printable("ab\xC2"), "ab\\xc2");               // a sequence cut short
  EXPECT_EQ(Printable("\xE2\x86x"), "\\xe2\\x86x");
}

}  // namespace
}  // namespace stagecraft
