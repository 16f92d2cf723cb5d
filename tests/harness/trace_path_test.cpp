// harness/trace_path.cpp: one trace file per schedule beside the name given, worked by hand.
#include "stagecraft/harness/trace_path.h"

#include <gtest/gtest.h>

namespace stagecraft::harness {
namespace {

TEST(TracePath, OneScheduleKeepsThePath) { EXPECT_EQ(TracePath("out/t.json", "1f1b", false), "out/t.json"); }

TEST(TracePath, SeveralGoBesideItWithTheScheduleBeforeTheExtension) {
  EXPECT_EQ(TracePath("out/t.json", "zb-h1", true), "out/t.zb-h1.json");
  EXPECT_EQ(TracePath("out/t", "zb-h1", true), "out/t.zb-h1");         // no extension
  EXPECT_EQ(TracePath("out.d/t", "gpipe", true), "out.d/t.gpipe");      // a dot in the folder only
  EXPECT_EQ(TracePath("t.json", "orders/v 1.csv", true), "t.orders_v_1.csv.json");  // one file name
}

}  // namespace
}  // namespace stagecraft::harness
