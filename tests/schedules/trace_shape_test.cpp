// Tests for schedules/src/trace_shape.cpp: a trace's stated shape is its shape; without one the
// shape is read off its ops (loop before V), worked out by hand for small placements.
#include <cstdint>
#include <limits>
#include <optional>
#include <vector>

#include <gtest/gtest.h>

#include "stagecraft/schedules/trace.h"

namespace stagecraft::schedules {
namespace {

// A trace with one F per (rank, stage) pair given.
Trace OpsOn(const std::vector<std::pair<int, int>>& rank_stage) {
  Trace t;
  for (const auto& [rank, stage] : rank_stage) {
    TraceOp op;
    op.rank = rank;
    op.op = Op{OpKind::kF, stage, 0, 0, 0, -1};
    t.ops.push_back(op);
  }
  return t;
}

TEST(TraceShapeTest, ReadOffTheOpsWithoutAStatement) {
  // Loop (Megatron): stage s on rank s % 2.
  EXPECT_EQ(TraceShape(OpsOn({{0, 0}, {1, 1}, {0, 2}, {1, 3}})), (Shape{2, 2, Placement::kLoop}));
  // V: the second chunk runs back, stages 2 and 3 on ranks 1 and 0.
  EXPECT_EQ(TraceShape(OpsOn({{0, 0}, {1, 1}, {1, 2}, {0, 3}})), (Shape{2, 2, Placement::kV}));
  // One chunk: loop and V agree; loop is named. One rank holds every stage.
  EXPECT_EQ(TraceShape(OpsOn({{0, 0}, {1, 1}, {2, 2}})), (Shape{3, 1, Placement::kLoop}));
  EXPECT_EQ(TraceShape(OpsOn({{0, 0}, {0, 1}})), (Shape{1, 2, Placement::kLoop}));
  // Three stages on two ranks, a stage on the wrong rank, no ops: no shape.
  EXPECT_EQ(TraceShape(OpsOn({{0, 0}, {1, 1}, {0, 2}})), std::nullopt);
  EXPECT_EQ(TraceShape(OpsOn({{1, 0}, {0, 1}})), std::nullopt);
  EXPECT_EQ(TraceShape(Trace{}), std::nullopt);
  // A stage at the top of the range is no overflow, and fits no shape of 2 ranks.
  EXPECT_EQ(TraceShape(OpsOn({{0, 0}, {1, std::numeric_limits<int32_t>::max()}})), std::nullopt);
}

// The ops of a 3-rank pipeline whose last rank left nothing read as 2 ranks; the statement
// says 3. A V statement holds even where the ops alone read as loop.
TEST(TraceShapeTest, TheStatedShapeWins) {
  Trace t = OpsOn({{0, 0}, {1, 1}});
  EXPECT_EQ(TraceShape(t), (Shape{2, 1, Placement::kLoop}));
  t.shape = Shape{3, 1, Placement::kLoop};
  EXPECT_EQ(TraceShape(t), t.shape);
  t.shape = Shape{2, 1, Placement::kV};
  EXPECT_EQ(TraceShape(t), t.shape);
  t.ops.clear();
  EXPECT_EQ(TraceShape(t), t.shape);
}

}  // namespace
}  // namespace stagecraft::schedules
