// The shared statistics (base/stats.h) on hand-worked series.
#include "stagecraft/base/stats.h"

#include <cstdint>
#include <limits>
#include <vector>

#include <gtest/gtest.h>

namespace stagecraft {
namespace {

TEST(Median, OddAndEvenCountsInAnyOrder) {
  EXPECT_EQ(Median(std::vector<double>{}), 0.0);
  EXPECT_EQ(Median(std::vector<double>{7}), 7.0);
  EXPECT_EQ(Median(std::vector<double>{3, 1, 2}), 2.0);
  EXPECT_EQ(Median(std::vector<double>{4, 1, 3, 2}), 2.5);
  EXPECT_EQ(Median(std::vector<double>{1, 100, 2, 3, 1000}), 3.0);  // outliers do not move it
  EXPECT_EQ(Median(std::vector<int64_t>{}), 0);
  EXPECT_EQ(Median(std::vector<int64_t>{10, 40, 20, 30}), 25);
  EXPECT_EQ(Median(std::vector<int64_t>{10, 11}), 10);  // rounded toward zero
  constexpr int64_t kBig = std::numeric_limits<int64_t>::max();
  EXPECT_EQ(Median(std::vector<int64_t>{kBig, kBig - 2}), kBig - 1);  // no overflow
}

TEST(SpreadOf, MedianMinMaxAndSpread) {
  const SeriesSpread s = SpreadOf({10, 12, 8, 11});
  EXPECT_EQ(s.median, 10.5);
  EXPECT_EQ(s.min, 8);
  EXPECT_EQ(s.max, 12);
  EXPECT_DOUBLE_EQ(s.spread_pct, 100.0 * 4 / 10.5);
  EXPECT_EQ(SpreadOf({}).spread_pct, 0);
  EXPECT_EQ(SpreadOf({0, 0}).spread_pct, 0);
}

TEST(RelativeErrorPct, SignedAgainstTheMeasuredValue) {
  EXPECT_DOUBLE_EQ(*RelativeErrorPct(110, 100), 10.0);
  EXPECT_DOUBLE_EQ(*RelativeErrorPct(90, 100), -10.0);
  EXPECT_EQ(*RelativeErrorPct(0, 0), 0.0);
  EXPECT_FALSE(RelativeErrorPct(5, 0).has_value());
}

}  // namespace
}  // namespace stagecraft
