// The short human formats (base/format.h): units chosen by size, three significant digits.
#include "stagecraft/base/format.h"

#include <cstdint>

#include <gtest/gtest.h>

namespace stagecraft {
namespace {

TEST(FormatBytes, BinaryUnits) {
  EXPECT_EQ(FormatBytes(0), "0 B");
  EXPECT_EQ(FormatBytes(512), "512 B");
  EXPECT_EQ(FormatBytes(1023), "1023 B");
  EXPECT_EQ(FormatBytes(1024), "1.00 KiB");
  EXPECT_EQ(FormatBytes(1536), "1.50 KiB");
  EXPECT_EQ(FormatBytes(1'610'612'736), "1.50 GiB");
  EXPECT_EQ(FormatBytes(85'899'345'920), "80.00 GiB");
  EXPECT_EQ(FormatBytes(-2048), "-2.00 KiB");
}

TEST(FormatDuration, ThreeSignificantDigits) {
  EXPECT_EQ(FormatDuration(0), "0 ns");
  EXPECT_EQ(FormatDuration(300), "300 ns");
  EXPECT_EQ(FormatDuration(2000), "2.00 us");
  EXPECT_EQ(FormatDuration(12'345'678), "12.3 ms");
  EXPECT_EQ(FormatDuration(150'000'000), "150 ms");
  EXPECT_EQ(FormatDuration(1'500'000'000), "1.50 s");
  EXPECT_EQ(FormatDuration(999'999), "1000 us");
}

}  // namespace
}  // namespace stagecraft
