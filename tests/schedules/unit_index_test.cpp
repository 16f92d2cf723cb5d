// Tests for schedules/src/unit_index.cpp: the size check of a schedule read from a file, at its
// two limits and with factors whose product overflows 64 bits.
#include "stagecraft/schedules/unit_index.h"

#include <gtest/gtest.h>

namespace stagecraft::schedules {
namespace {

TEST(CheckUnitSpaceTest, TakesUpToTheLimits) {
  EXPECT_EQ(CheckUnitSpace("a", 1 << 9, 1 << 10, 1 << 10, kMaxUnits), "");
  EXPECT_EQ(CheckUnitSpace("a", 1, 1, kMaxUnits + 1, kMaxUnits + 1),
            "a: schedule too large (1 stages x 1 microbatches x 536870913 steps)");
  EXPECT_EQ(CheckUnitSpace("a", 4, kMaxUnitsWithoutForward, 1, 3 * kMaxUnitsWithoutForward), "");
  EXPECT_EQ(CheckUnitSpace("a", 4, kMaxUnitsWithoutForward, 1, 3 * kMaxUnitsWithoutForward - 1),
            "a: 4 stages x 65536 microbatches x 1 steps need 262144 forward actions, one each, but there are 196607");
}

TEST(CheckUnitSpaceTest, SaturatesInsteadOfOverflowing) {
  const int64_t big = int64_t{1} << 31;
  EXPECT_EQ(CheckUnitSpace("a", big * big, big, big, 0),
            "a: schedule too large (4611686018427387904 stages x 2147483648 microbatches x 2147483648 steps)");
}

}  // namespace
}  // namespace stagecraft::schedules
