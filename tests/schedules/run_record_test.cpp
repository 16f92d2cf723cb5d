// Tests for schedules/src/run_record.cpp: FinishRunRecord on hand-worked timings (two ranks,
// receives posted ahead, a run stopped part-way) against values worked out by hand.
#include "stagecraft/schedules/run_record.h"

#include <vector>

#include <gtest/gtest.h>

#include "bubble_split_cases.h"

namespace stagecraft::schedules {
namespace {

constexpr int64_t kMs = 1'000'000;

Op MakeOp(OpKind kind, int stage, int microbatch, int peer = -1) {
  return Op{.kind = kind, .stage = stage, .microbatch = microbatch, .peer = peer};
}

// Two stages, two microbatches, 1F1B-like on rank 1:
//   rank 0: F0 SEND_F0 F1 SEND_F1 RECV_B0 B0 RECV_B1 B1 STEP
//   rank 1: RECV_F0 RECV_F1 F0 B0 SEND_B0 F1 B1 SEND_B1 STEP
Schedule TwoRanks() {
  Schedule s;
  s.name = "hand";
  s.shape.ranks = 2;
  s.microbatches = 2;
  s.ops = {{MakeOp(OpKind::kF, 0, 0), MakeOp(OpKind::kSendF, 0, 0, 1), MakeOp(OpKind::kF, 0, 1),
            MakeOp(OpKind::kSendF, 0, 1, 1), MakeOp(OpKind::kRecvB, 0, 0, 1), MakeOp(OpKind::kB, 0, 0),
            MakeOp(OpKind::kRecvB, 0, 1, 1), MakeOp(OpKind::kB, 0, 1), MakeOp(OpKind::kStep, 0, 0)},
           {MakeOp(OpKind::kRecvF, 1, 0, 0), MakeOp(OpKind::kRecvF, 1, 1, 0), MakeOp(OpKind::kF, 1, 0),
            MakeOp(OpKind::kB, 1, 0), MakeOp(OpKind::kSendB, 1, 0, 0), MakeOp(OpKind::kF, 1, 1),
            MakeOp(OpKind::kB, 1, 1), MakeOp(OpKind::kSendB, 1, 1, 0), MakeOp(OpKind::kStep, 1, 0)}};
  return s;
}

RunRecord Timings() {
  RunRecord r;
  r.ranks.resize(2);
  // ms:           F0      SEND    F1      SEND    RECV    B0       RECV     B1       STEP
  r.ranks[0].ops = {{2, 4}, {4, 5}, {4, 6}, {6, 7}, {6, 9}, {9, 13}, {13, 14}, {14, 18}, {18, 19}};
  //               RECV    RECV    F0      B0      SEND    F1       B1       SEND     STEP
  r.ranks[1].ops = {{1, 5}, {1, 7}, {5, 7}, {7, 9}, {9, 9}, {9, 11}, {11, 14}, {14, 14}, {14, 15}};
  for (RankRecord& rank : r.ranks) {
    for (OpTiming& t : rank.ops) t = {t.start_ns * kMs, t.end_ns * kMs};
  }
  r.ranks[0].peak_memory_bytes = 100;
  r.ranks[1].peak_memory_bytes = 300;
  return r;
}

TEST(FinishRunRecordTest, SpanBusyFirstForwardInFlightAndOomByHand) {
  RunRecord r = Timings();
  FinishRunRecord(TwoRanks(), 200, &r);
  EXPECT_EQ(r.start_ns, 1 * kMs) << "the run starts with its first op, a receive posted before any compute";
  EXPECT_EQ(r.end_ns, 19 * kMs) << "and ends with its last compute op or STEP";
  // Rank 0: F 2 + 2, B 4 + 4, STEP 1; rank 1: F 2 + 2, B 2 + 3, STEP 1.
  EXPECT_EQ(r.ranks[0].busy_ns, 13 * kMs);
  EXPECT_EQ(r.ranks[1].busy_ns, 10 * kMs);
  EXPECT_EQ(r.ranks[0].first_f_start_ns, 2 * kMs);
  EXPECT_EQ(r.ranks[1].first_f_start_ns, 5 * kMs);
  EXPECT_EQ(r.ranks[0].last_compute_end_ns, 19 * kMs);
  EXPECT_EQ(r.ranks[1].last_compute_end_ns, 15 * kMs);
  EXPECT_EQ(r.ranks[0].peak_inflight, 2) << "GPipe-like on rank 0: both forwards before a backward";
  EXPECT_EQ(r.ranks[1].peak_inflight, 1) << "each backward right after its forward on rank 1";
  EXPECT_FALSE(r.ranks[0].oom);
  EXPECT_TRUE(r.ranks[1].oom) << "300 bytes over a 200-byte device";

  RunRecord exact = Timings();
  FinishRunRecord(TwoRanks(), 300, &exact);
  EXPECT_FALSE(exact.ranks[1].oom) << "a peak equal to the device's memory fits";
  RunRecord unchecked = Timings();
  FinishRunRecord(TwoRanks(), 0, &unchecked);
  EXPECT_FALSE(unchecked.ranks[1].oom) << "0: no memory check";
}

TEST(FinishRunRecordTest, ARunStoppedPartWayCountsWhatRan) {
  RunRecord r = Timings();
  // Rank 0 stopped after its first F; its receives were already posted (ahead).
  for (size_t i = 1; i < r.ranks[0].ops.size(); ++i) {
    if (i != 4) r.ranks[0].ops[i] = OpTiming{};
  }
  for (OpTiming& t : r.ranks[1].ops) t = OpTiming{};
  FinishRunRecord(TwoRanks(), 0, &r);
  EXPECT_EQ(r.ranks[0].busy_ns, 2 * kMs);
  EXPECT_EQ(r.ranks[0].peak_inflight, 1) << "the second F had not run, though a later receive was posted";
  EXPECT_EQ(r.ranks[1].busy_ns, 0);
  EXPECT_EQ(r.ranks[1].first_f_start_ns, -1);
  EXPECT_EQ(r.ranks[1].peak_inflight, 0);
  EXPECT_EQ(r.start_ns, 2 * kMs);
  EXPECT_EQ(r.end_ns, 4 * kMs);
}

TEST(FinishRunRecordTest, DerivesAgainFromScratch) {
  RunRecord r = Timings();
  FinishRunRecord(TwoRanks(), 0, &r);
  const RunRecord once = r;
  FinishRunRecord(TwoRanks(), 0, &r);
  EXPECT_EQ(r.ranks[0].busy_ns, once.ranks[0].busy_ns) << "nothing accumulates across calls";
  EXPECT_EQ(r.ranks[1].peak_inflight, once.ranks[1].peak_inflight);
}

// A REDUCE_GRAD only posts the all-reduce: its time is not busy, and the run ends with the last
// compute op or STEP (bubble_split_cases.h: F 1 + F 1 + B 2 + B 3 + STEP 0.5 + STEP 0.5 ms).
TEST(FinishRunRecordTest, ReduceGradIsNotBusy) {
  test_cases::HandTimeline h = test_cases::ReplicatedTimeline();
  h.r.start_ns = h.r.end_ns = -5;  // derived anew
  FinishRunRecord(h.s, 0, &h.r);
  EXPECT_EQ(h.r.ranks[0].busy_ns, 8 * kMs);
  EXPECT_EQ(h.r.ranks[0].last_compute_end_ns, 11 * kMs);
  EXPECT_EQ(h.r.start_ns, 0);
  EXPECT_EQ(h.r.end_ns, 11 * kMs);
}

// Ranks 0 and 1 share device 0: 100 + 300 at first; at 10 rank 0 grows to 400 as rank 1 drops
// to 0, one moment (read after both: 400, never the 700 of one sample without the other). Rank 2
// is alone on device 1: no device, no device peak.
TEST(SumSharedDeviceMemory, ThePeakOfTheSumAtEachMoment) {
  RunRecord record;
  record.ranks.resize(3);
  record.ranks[0].memory = {{0, 100}, {10, 400}};
  record.ranks[1].memory = {{0, 300}, {10, 0}};
  record.ranks[2].memory = {{0, 999}};
  SumSharedDeviceMemory({0, 0, 1}, &record);
  EXPECT_EQ(record.ranks[0].device_peak_memory_bytes, 400);
  EXPECT_EQ(record.ranks[1].device_peak_memory_bytes, 400);
  EXPECT_EQ(record.ranks[0].device, 0);
  EXPECT_EQ(record.ranks[1].device, 0);
  EXPECT_EQ(record.ranks[2].device_peak_memory_bytes, -1);
  EXPECT_EQ(record.ranks[2].device, -1);
  // A rank's bytes hold from its sample on: rank 1 at 350 from 5 meets rank 0's 400 from 10.
  record.ranks[1].memory = {{5, 350}};
  SumSharedDeviceMemory({0, 0, 1}, &record);
  EXPECT_EQ(record.ranks[0].device_peak_memory_bytes, 750);
  RunRecord untouched;
  untouched.ranks.resize(2);
  untouched.ranks[0].memory = {{0, 5}};
  SumSharedDeviceMemory({}, &untouched);
  EXPECT_EQ(untouched.ranks[0].device_peak_memory_bytes, -1);
}

}  // namespace
}  // namespace stagecraft::schedules
