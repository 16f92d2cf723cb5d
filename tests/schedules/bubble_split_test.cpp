// schedules/bubble_split.cpp on hand-worked timelines: every gap before a compute op is wait
// until its input's transfer starts, transfer until it arrives, overhead after; idle before
// the first op and after the last; with replicas, a STEP's gap is collective while its
// REDUCE_GRAD runs; the six parts add up to the makespan, on hand-worked and generated runs.
#include "stagecraft/schedules/bubble_split.h"

#include <map>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

#include "bubble_split_cases.h"
#include "generator_cases.h"
#include "stagecraft/schedules/lower.h"
#include "stagecraft/schedules/trace.h"

namespace stagecraft::schedules {
namespace {

constexpr int64_t kMs = test_cases::kSplitMs;
using test_cases::HandTimeline;

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
    EXPECT_EQ(x.collective_ns, 0);  // one replica
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

int64_t Sum(const RankSplit& x) {
  return x.compute_ns + x.wait_ns + x.transfer_ns + x.collective_ns + x.overhead_ns + x.idle_ns;
}

// One rank, one stage, 2 replicas: F [0,2], B [2,6], REDUCE_GRAD [6,9], STEP [10,11] (ms). The
// gap [6,10] before the STEP is collective until the REDUCE_GRAD completed at 9 (3 ms), then
// overhead (1 ms); compute 2 + 4 + 1 = 7, makespan 11.
HandTimeline StepWaitingThreeMs() {
  HandTimeline h;
  h.s.name = "wait3";
  h.s.data_parallel = 2;
  h.s.lowered = true;
  h.s.ops = {{Op{OpKind::kF, 0, 0, 0, 0, -1}, Op{OpKind::kB, 0, 0, 0, 0, -1}, Op{OpKind::kReduceGrad, 0, 0, 0, 1, -1},
              Op{OpKind::kStep, 0, 0, 0, 1, -1}}};
  h.r.end_ns = 11 * kMs;
  h.r.ranks.resize(1);
  h.r.ranks[0].ops = {{0, 2 * kMs}, {2 * kMs, 6 * kMs}, {6 * kMs, 9 * kMs}, {10 * kMs, 11 * kMs}};
  return h;
}

TEST(BubbleSplitCollective, StepWaitingForItsReduceGradIsCollective) {
  const HandTimeline h = StepWaitingThreeMs();
  const std::vector<RankSplit> split = SplitBubbles(h.s, h.r, true);
  ASSERT_EQ(split.size(), 1u);
  const RankSplit& x = split[0];
  EXPECT_EQ(x.compute_ns, 7 * kMs);  // the REDUCE_GRAD's 3 ms are not compute
  EXPECT_EQ(x.collective_ns, 3 * kMs);
  EXPECT_EQ(x.overhead_ns, 1 * kMs);
  EXPECT_EQ(x.wait_ns + x.transfer_ns + x.idle_ns, 0);
  ASSERT_EQ(x.gaps.size(), 2u);
  EXPECT_EQ(x.gaps[0].cause, GapCause::kCollective);
  EXPECT_EQ(x.gaps[0].start_ns, 6 * kMs);
  EXPECT_EQ(x.gaps[0].end_ns, 9 * kMs);
  EXPECT_EQ(x.gaps[1].cause, GapCause::kOverhead);
  EXPECT_EQ(x.gaps[1].end_ns, 10 * kMs);
  EXPECT_EQ(Sum(x), 11 * kMs);
}

// The same run without the REDUCE_GRAD (one replica): the whole gap is overhead, as before.
TEST(BubbleSplitCollective, WithoutReduceGradTheGapIsOverhead) {
  HandTimeline h = StepWaitingThreeMs();
  h.s.data_parallel = 1;
  h.s.ops[0].erase(h.s.ops[0].begin() + 2);
  h.r.ranks[0].ops.erase(h.r.ranks[0].ops.begin() + 2);
  const RankSplit x = SplitBubbles(h.s, h.r, false)[0];
  EXPECT_EQ(x.compute_ns, 7 * kMs);
  EXPECT_EQ(x.collective_ns, 0);
  EXPECT_EQ(x.overhead_ns, 4 * kMs);
  EXPECT_EQ(Sum(x), 11 * kMs);
}

// A REDUCE_GRAD that completes after the STEP started (a clock skew, a bad record) counts only
// up to the STEP's start; one of another version does not count.
TEST(BubbleSplitCollective, OnlyItsOwnReduceGradUpToTheStepsStart) {
  HandTimeline h = StepWaitingThreeMs();
  h.r.ranks[0].ops[2].end_ns = 12 * kMs;
  RankSplit x = SplitBubbles(h.s, h.r, false)[0];
  EXPECT_EQ(x.collective_ns, 4 * kMs);
  EXPECT_EQ(x.overhead_ns, 0);
  h = StepWaitingThreeMs();
  h.s.ops[0][2].version = 2;  // not the version the STEP produces
  x = SplitBubbles(h.s, h.r, false)[0];
  EXPECT_EQ(x.collective_ns, 0);
  EXPECT_EQ(x.overhead_ns, 4 * kMs);
}

TEST(BubbleSplitCollective, HandWorkedTwoStagesOneWaitsOneDoesNot) {
  const HandTimeline h = test_cases::ReplicatedTimeline();  // worked out there
  const RankSplit x = SplitBubbles(h.s, h.r, true)[0];
  constexpr int64_t kHalf = kMs / 2;
  EXPECT_EQ(x.compute_ns, 8 * kMs);
  EXPECT_EQ(x.collective_ns, 2 * kMs);
  EXPECT_EQ(x.overhead_ns, 1 * kMs);
  EXPECT_EQ(x.wait_ns + x.transfer_ns + x.idle_ns, 0);
  ASSERT_EQ(x.gaps.size(), 3u);
  EXPECT_EQ(x.gaps[0].cause, GapCause::kOverhead);  // STEP s1: its REDUCE_GRAD was done at 6
  EXPECT_EQ(x.gaps[0].start_ns, 7 * kMs);
  EXPECT_EQ(x.gaps[0].end_ns, 7 * kMs + kHalf);
  EXPECT_EQ(x.gaps[1].cause, GapCause::kCollective);  // STEP s0 waited until 10
  EXPECT_EQ(x.gaps[1].start_ns, 8 * kMs);
  EXPECT_EQ(x.gaps[1].end_ns, 10 * kMs);
  EXPECT_EQ(x.gaps[2].cause, GapCause::kOverhead);
  EXPECT_EQ(x.gaps[2].end_ns, 10 * kMs + kHalf);
  EXPECT_EQ(Sum(x), h.r.makespan_ns());
}

// The three entry points agree with replicas: the record, the same ops as TimedOp lists, and a
// trace written and read back (its REDUCE_GRADs on the collective stream).
TEST(BubbleSplitCollective, RecordTimedOpsAndTraceAgree) {
  const HandTimeline h = test_cases::ReplicatedTimeline();
  const RankSplit want = SplitBubbles(h.s, h.r, true)[0];
  std::vector<std::vector<TimedOp>> timed(1);
  for (size_t i = 0; i < h.s.ops[0].size(); ++i) {
    timed[0].push_back({h.s.ops[0][i], h.r.ranks[0].ops[i].start_ns, h.r.ranks[0].ops[i].end_ns});
  }
  const Trace trace = TraceFromJson(TraceToJson(BuildTrace(h.s, h.r, "hand", "predicted", std::nullopt)), "t.json").trace;
  for (const RankSplit& got : {SplitBubbles(h.s.shape, timed, 0, h.r.end_ns, true)[0], SplitBubbles(trace, true)[0]}) {
    EXPECT_EQ(got.compute_ns, want.compute_ns);
    EXPECT_EQ(got.collective_ns, 2 * kMs);
    EXPECT_EQ(got.overhead_ns, want.overhead_ns);
    EXPECT_EQ(got.idle_ns, 0);
    ASSERT_EQ(got.gaps.size(), want.gaps.size());
    for (size_t k = 0; k < want.gaps.size(); ++k) {
      EXPECT_EQ(got.gaps[k].cause, want.gaps[k].cause) << "gap " << k;
      EXPECT_EQ(got.gaps[k].start_ns, want.gaps[k].start_ns) << "gap " << k;
      EXPECT_EQ(got.gaps[k].end_ns, want.gaps[k].end_ns) << "gap " << k;
    }
  }
}

// Made-up timings for a lowered schedule: each rank runs its list in order with pseudo-random
// gaps and durations, a STEP starts after its REDUCE_GRAD completes about half the time (else
// during it). Returns the record and, per rank, the collective time the split's definition gives
// (the part of each STEP's gap before its REDUCE_GRAD's end), worked out while the times are made.
std::pair<RunRecord, std::vector<int64_t>> MadeUpRun(const Schedule& s, uint32_t seed) {
  std::mt19937 rng(seed);
  const auto pick = [&rng](int64_t lo, int64_t hi) { return std::uniform_int_distribution<int64_t>(lo, hi)(rng); };
  RunRecord run;
  run.ranks.resize(s.ranks());
  std::vector<int64_t> collective(s.ranks(), 0);
  for (int r = 0; r < s.ranks(); ++r) {
    int64_t t = pick(0, 50);  // the end of the rank's last compute op
    std::map<std::pair<int32_t, int32_t>, int64_t> reduce_end;
    for (const Op& op : s.ops[r]) {
      OpTiming timing;
      if (IsComm(op.kind)) {
        timing = {std::max<int64_t>(0, t - pick(0, 20)), t + pick(0, 40)};
      } else if (op.kind == OpKind::kReduceGrad) {
        timing = {t, t + pick(0, 60)};
        reduce_end[{op.stage, op.version}] = timing.end_ns;
      } else {
        int64_t start = t + pick(0, 10);
        if (op.kind == OpKind::kStep) {
          const int64_t done = reduce_end.at({op.stage, op.version});
          if (pick(0, 1) == 1) start = std::max(start, done + pick(0, 5));
          collective[r] += std::max<int64_t>(0, std::min(done, start) - t);
        }
        timing = {start, start + pick(1, 30)};
        t = timing.end_ns;
      }
      run.ranks[r].ops.push_back(timing);
    }
  }
  FinishRunRecord(s, 0, &run);
  return {run, collective};
}

TEST(BubbleSplitCollective, PartsSumToTheMakespanOnEveryGeneratorWithTwoReplicas) {
  int64_t total_collective = 0;
  uint32_t seed = 1;
  for (const auto& c : test_cases::SmallGeneratorCases()) {
    SCOPED_TRACE(std::string(c.info->name) + " ranks " + std::to_string(c.params.ranks) + " m " +
                 std::to_string(c.params.microbatches) + " steps " + std::to_string(c.params.steps));
    GeneratorParams p = c.params;
    p.data_parallel = 2;
    const Schedule s = Lower(Generate(c.info->name, p), P2p::kAhead);
    const auto [run, collective] = MadeUpRun(s, seed++);
    const std::vector<RankSplit> split = SplitBubbles(s, run, false);
    ASSERT_EQ(split.size(), static_cast<size_t>(s.ranks()));
    for (int r = 0; r < s.ranks(); ++r) {
      EXPECT_EQ(Sum(split[r]), run.makespan_ns()) << "rank " << r;
      EXPECT_EQ(split[r].collective_ns, collective[r]) << "rank " << r;
      EXPECT_EQ(split[r].compute_ns, run.ranks[r].busy_ns) << "rank " << r;
      total_collective += split[r].collective_ns;
    }
  }
  EXPECT_GT(total_collective, 0);  // the made-up runs did make STEPs wait
}

}  // namespace
}  // namespace stagecraft::schedules
