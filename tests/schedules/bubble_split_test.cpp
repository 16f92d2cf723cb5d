// schedules/bubble_split.cpp on hand-worked timelines: every gap before a compute op is wait
// until its input's transfer starts, transfer until it arrives, overhead after; idle before
// the first op and after the last; the five parts add up to the makespan.
#include "stagecraft/schedules/bubble_split.h"

#include <vector>

#include <gtest/gtest.h>

#include "bubble_split_cases.h"

namespace stagecraft::schedules {
namespace {

constexpr int64_t kMs = test_cases::kSplitMs;

TEST(BubbleSplit, HandWorkedGapIsWaitThenTransferThenOverhead) {
  const test_cases::HandTimeline h = test_cases::HandWorkedTimeline();  // worked out there
  const std::vector<RankSplit> split = SplitBubbles(h.s, h.r, true);
  ASSERT_EQ(split.size(), 2u);
  EXPECT_EQ(split[0].compute_ns, 20 * kMs);
  EXPECT_EQ(split[0].idle_ns, 10 * kMs);  // after its last op
  EXPECT_EQ(split[0].wait_ns + split[0].transfer_ns + split[0].overhead_ns, 0);
  const RankSplit& r1 = split[1];
  EXPECT_EQ(r1.compute_ns, 12 * kMs);
  EXPECT_EQ(r1.idle_ns, 12 * kMs);  // before its first op
  EXPECT_EQ(r1.wait_ns, 2 * kMs);
  EXPECT_EQ(r1.transfer_ns, 3 * kMs);
  EXPECT_EQ(r1.overhead_ns, 1 * kMs);
  ASSERT_EQ(r1.gaps.size(), 4u);
  EXPECT_EQ(r1.gaps[0].cause, GapCause::kIdle);
  EXPECT_EQ(r1.gaps[1].cause, GapCause::kWait);
  EXPECT_EQ(r1.gaps[1].start_ns, 18 * kMs);
  EXPECT_EQ(r1.gaps[1].end_ns, 20 * kMs);
  EXPECT_EQ(r1.gaps[2].cause, GapCause::kTransfer);
  EXPECT_EQ(r1.gaps[2].end_ns, 23 * kMs);
  EXPECT_EQ(r1.gaps[3].cause, GapCause::kOverhead);
  EXPECT_EQ(r1.gaps[3].end_ns, 24 * kMs);
  for (const RankSplit& x : split) {
    EXPECT_EQ(x.compute_ns + x.wait_ns + x.transfer_ns + x.overhead_ns + x.idle_ns, h.r.makespan_ns());
  }
}

// A receive posted late (after the send): the transfer starts at the post, so the wait lasts
// until then. An input that arrived before the gap leaves only overhead.
TEST(BubbleSplit, LatePostAndEarlyArrival) {
  test_cases::HandTimeline h = test_cases::HandWorkedTimeline();
  h.r.ranks[1].ops[1] = {21 * kMs, 23 * kMs};  // RECV_F1 posted at 21, after the send at 20
  std::vector<RankSplit> split = SplitBubbles(h.s, h.r, false);
  EXPECT_EQ(split[1].wait_ns, 3 * kMs);
  EXPECT_EQ(split[1].transfer_ns, 2 * kMs);
  h.r.ranks[1].ops[1] = {0, 21 * kMs};  // arrived during a longer F0
  h.r.ranks[1].ops[2] = {12 * kMs, 22 * kMs};
  split = SplitBubbles(h.s, h.r, false);
  EXPECT_EQ(split[1].wait_ns, 0);
  EXPECT_EQ(split[1].transfer_ns, 0);
  EXPECT_EQ(split[1].overhead_ns, 2 * kMs);
  EXPECT_TRUE(split[1].gaps.empty());  // not kept unless asked
}

}  // namespace
}  // namespace stagecraft::schedules
