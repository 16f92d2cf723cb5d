// Tests for schedules/src/analysis.cpp's grid printer: a small grid worked by hand, and the
// limits (256 rows, 4096 columns), checked on both sides of each edge with makespans from the
// closed forms (GPipe and 1F1B 3(m + p - 1), ZB-H1 3m + p - 1 at unit costs).
#include "stagecraft/schedules/analysis.h"

#include <string>

#include <gtest/gtest.h>

#include "generator_cases.h"
#include "stagecraft/base/error.h"
#include "stagecraft/schedules/generators.h"

namespace stagecraft::schedules {
namespace {

using test_cases::Params;

// The error RenderGrid throws, or "" when it renders.
std::string RenderError(const Schedule& s) {
  try {
    RenderGrid(s);
    return "";
  } catch (const InputError& e) {
    return e.what();
  }
}

TEST(RenderGrid, GpipeTwoByTwoAsWorkedByHand) {
  const std::string grid = RenderGrid(Generate("gpipe", Params(2, 2)));
  EXPECT_NE(grid.find("rank  0 | F0 F1 .  .  .  B0 B0 B1 B1 | idle 3, in flight 2, versions 1\n"), std::string::npos)
      << grid;
  EXPECT_NE(grid.find("rank  1 | .  F0 F1 B0 B0 B1 B1 .  .  | idle 3, in flight 2, versions 1\n"), std::string::npos)
      << grid;
  EXPECT_NE(grid.find("makespan 9 units\n"), std::string::npos) << grid;
}

TEST(RenderGrid, RowsUpToTheLimitRenderOneMoreIsRefusedBeforeScheduling) {
  const Schedule at_limit = Generate("1f1b", Params(kMaxGridRows, 1));
  EXPECT_EQ(GridSizeProblem(at_limit), "");
  EXPECT_EQ(RenderError(at_limit), "");

  const Schedule over = Generate("1f1b", Params(kMaxGridRows + 1, 1));
  const std::string why = GridSizeProblem(over);
  // Each rank runs one F and one B: the busiest rank shows 3 columns before any scheduling.
  EXPECT_EQ(why,
            "1f1b: a grid of 257 rows (ranks) by at least 3 columns (time units) is too large to show; the grid "
            "shows at most 256 rows by 4096 columns: use --format csv or --format json");
  EXPECT_EQ(RenderError(over), why);
}

TEST(RenderGrid, ColumnsUpToTheLimitRenderOneMoreIsRefused) {
  // ZB-H1, p = 2, m = 1365: makespan 3 * 1365 + 1 = 4096, exactly the limit.
  const Schedule at_limit = Generate("zb-h1", Params(2, 1365));
  EXPECT_EQ(UnitTimeGrid(at_limit).makespan, kMaxGridColumns);
  EXPECT_EQ(RenderError(at_limit), "");

  // p = 3: makespan 4097, while each rank is busy 4095 units: known only once scheduled.
  const Schedule over = Generate("zb-h1", Params(3, 1365));
  EXPECT_EQ(GridSizeProblem(over), "");
  EXPECT_EQ(RenderError(over),
            "zb-h1: a grid of 3 rows (ranks) by 4097 columns (time units) is too large to show; the grid shows at "
            "most 256 rows by 4096 columns: use --format csv or --format json");

  // One rank busier than the limit is refused before scheduling: GPipe m = 1366 on one rank
  // is 3 * 1366 = 4098 units of work.
  EXPECT_NE(GridSizeProblem(Generate("gpipe", Params(1, 1366))).find("by at least 4098 columns"), std::string::npos);
}

}  // namespace
}  // namespace stagecraft::schedules
