// A hand-worked two-rank timeline for the bubble split (bubble_split_test.cpp) and the viewer's
// split read off a trace (tests/viz/trace_set_test.cpp).
//
// GPipe-like forwards of 2 microbatches over 2 ranks. Rank 0: F0 [0,10], SEND_F0 (starts 10),
// F1 [10,20], SEND_F1 (starts 20). Rank 1: RECV_F0 posted 0, arrives 12; RECV_F1 posted 0,
// arrives 23; F0 [12,18]; F1 [24,30]. Rank 1's gap [18,24] before F1: the transfer starts at
// 20 (wait 2), arrives at 23 (transfer 3), F1 starts at 24 (overhead 1). Times in ms.
#pragma once

#include <cstdint>

#include "stagecraft/schedules/ir.h"
#include "stagecraft/schedules/run_record.h"

namespace stagecraft::schedules::test_cases {

inline constexpr int64_t kSplitMs = 1'000'000;

struct HandTimeline {
  Schedule s;
  RunRecord r;
};

inline HandTimeline HandWorkedTimeline() {
  constexpr int64_t kMs = kSplitMs;
  HandTimeline h;
  h.s.name = "hand";
  h.s.shape.ranks = 2;
  h.s.microbatches = 2;
  h.s.lowered = true;
  h.s.ops = {{Op{OpKind::kF, 0, 0, 0, 0, -1}, Op{OpKind::kSendF, 0, 0, 0, 0, 1}, Op{OpKind::kF, 0, 1, 0, 0, -1},
              Op{OpKind::kSendF, 0, 1, 0, 0, 1}},
             {Op{OpKind::kRecvF, 1, 0, 0, 0, 0}, Op{OpKind::kRecvF, 1, 1, 0, 0, 0}, Op{OpKind::kF, 1, 0, 0, 0, -1},
              Op{OpKind::kF, 1, 1, 0, 0, -1}}};
  h.r.start_ns = 0;
  h.r.end_ns = 30 * kMs;
  h.r.ranks.resize(2);
  h.r.ranks[0].ops = {{0, 10 * kMs}, {10 * kMs, 12 * kMs}, {10 * kMs, 20 * kMs}, {20 * kMs, 23 * kMs}};
  h.r.ranks[1].ops = {{0, 12 * kMs}, {0, 23 * kMs}, {12 * kMs, 18 * kMs}, {24 * kMs, 30 * kMs}};
  return h;
}

// With 2 replicas, one rank running two stages (chunks 2), one step of one microbatch. Times in
// ms (a half as 500 us):
//   F s0 [0,1]  F s1 [1,2]  B s1 [2,4]  REDUCE_GRAD s1 [4,6]  B s0 [4,7]  REDUCE_GRAD s0 [7,10]
//   STEP s1 [7.5,8]  STEP s0 [10.5,11]
// STEP s1 does not wait: its REDUCE_GRAD completed at 6, before the gap [7,7.5] began, so that
// gap is overhead (0.5). STEP s0 waits: the gap [8,10.5] is collective until its REDUCE_GRAD
// completed at 10 (2), overhead after (0.5). Compute 1+1+2+3+0.5+0.5 = 8, makespan 11.
inline HandTimeline ReplicatedTimeline() {
  constexpr int64_t kMs = kSplitMs, kHalf = kSplitMs / 2;
  HandTimeline h;
  h.s.name = "hand-dp";
  h.s.shape = Shape{1, 2, Placement::kLoop};
  h.s.microbatches = 1;
  h.s.data_parallel = 2;
  h.s.lowered = true;
  h.s.ops = {{Op{OpKind::kF, 0, 0, 0, 0, -1}, Op{OpKind::kF, 1, 0, 0, 0, -1}, Op{OpKind::kB, 1, 0, 0, 0, -1},
              Op{OpKind::kReduceGrad, 1, 0, 0, 1, -1}, Op{OpKind::kB, 0, 0, 0, 0, -1},
              Op{OpKind::kReduceGrad, 0, 0, 0, 1, -1}, Op{OpKind::kStep, 1, 0, 0, 1, -1},
              Op{OpKind::kStep, 0, 0, 0, 1, -1}}};
  h.r.start_ns = 0;
  h.r.end_ns = 11 * kMs;
  h.r.ranks.resize(1);
  h.r.ranks[0].ops = {{0, 1 * kMs},           {1 * kMs, 2 * kMs},           {2 * kMs, 4 * kMs},
                      {4 * kMs, 6 * kMs},     {4 * kMs, 7 * kMs},           {7 * kMs, 10 * kMs},
                      {7 * kMs + kHalf, 8 * kMs}, {10 * kMs + kHalf, 11 * kMs}};
  return h;
}

}  // namespace stagecraft::schedules::test_cases
