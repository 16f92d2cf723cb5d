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

}  // namespace stagecraft::schedules::test_cases
