// Tests for schedules/src/metrics.cpp: DESIGN.md §4's definitions on a hand-worked two-rank
// record and on one with replicas, the executor's own numbers, and BuildTrace's streams and
// relative times.
#include "stagecraft/schedules/metrics.h"

#include <vector>

#include <gtest/gtest.h>

#include "bubble_split_cases.h"
#include "trace_cases.h"

namespace stagecraft::schedules {
namespace {

// Rank 0: F (0-10 ms), SEND_F; rank 1: RECV_F, F (12-20 ms). 2 microbatches of 3 samples, 1 step.
Schedule TwoRankSchedule() {
  Schedule s;
  s.name = "hand";
  s.shape.ranks = 2;
  s.microbatches = 2;
  s.ops = {{Op{OpKind::kF, 0, 0, 0, 0, -1}, Op{OpKind::kSendF, 0, 0, 0, 0, 1}},
           {Op{OpKind::kRecvF, 1, 0, 0, 0, 0}, Op{OpKind::kF, 1, 0, 0, 0, -1}}};
  return s;
}

RunRecord TwoRankRecord() {
  constexpr int64_t kMs = 1'000'000;
  RunRecord r;
  r.start_ns = 1 * kMs;
  r.end_ns = 21 * kMs;
  r.ranks.resize(2);
  r.ranks[0].ops = {{1 * kMs, 11 * kMs}, {11 * kMs, 12 * kMs}};
  r.ranks[0].busy_ns = 10 * kMs;
  r.ranks[0].first_f_start_ns = 1 * kMs;
  r.ranks[0].last_compute_end_ns = 11 * kMs;
  r.ranks[0].peak_memory_bytes = 4096;
  r.ranks[0].memory = {{0, 0}, {2 * kMs, 4096}};
  r.ranks[1].ops = {{1 * kMs, 12 * kMs}, {13 * kMs, 21 * kMs}};
  r.ranks[1].busy_ns = 8 * kMs;
  r.ranks[1].first_f_start_ns = 13 * kMs;
  r.ranks[1].last_compute_end_ns = 21 * kMs;
  r.ranks[1].oom = true;
  return r;
}

TEST(MetricsTest, DefinitionsOnAHandWorkedRecord) {
  const ScheduleMetrics m = ComputeMetrics(TwoRankSchedule(), TwoRankRecord(), 3);
  EXPECT_EQ(m.schedule, "hand");
  EXPECT_EQ(m.ranks, 2);
  EXPECT_EQ(m.makespan_ns, 20'000'000);
  EXPECT_DOUBLE_EQ(m.makespan_ms, 20);
  EXPECT_DOUBLE_EQ(m.step_time_ms, 20);
  EXPECT_DOUBLE_EQ(m.throughput_samples_per_s, 2 * 3 / 0.020);
  EXPECT_DOUBLE_EQ(m.bubble_fraction, (10.0 + 12.0) / (2 * 20.0));  // idle over ranks x makespan
  ASSERT_EQ(m.ranks_detail.size(), 2u);
  EXPECT_DOUBLE_EQ(m.ranks_detail[0].busy_ms, 10);
  EXPECT_DOUBLE_EQ(m.ranks_detail[0].span_ms, 10);
  EXPECT_DOUBLE_EQ(m.ranks_detail[1].span_ms, 8);
  // Rank 1 computes from 13 ms: everything before its first op is idle (bubble_split_test.cpp
  // has the gaps between ops).
  EXPECT_DOUBLE_EQ(m.ranks_detail[0].compute_ms, 10);
  EXPECT_DOUBLE_EQ(m.ranks_detail[0].idle_ms, 10);
  EXPECT_DOUBLE_EQ(m.ranks_detail[1].compute_ms, 8);
  EXPECT_DOUBLE_EQ(m.ranks_detail[1].idle_ms, 12);
  EXPECT_EQ(m.WorstMemoryRank(), 0);
  EXPECT_TRUE(m.AnyOom());
  EXPECT_FALSE(m.executor.has_value());
}

TEST(MetricsTest, ExecutorNumbers) {
  RunRecord r = TwoRankRecord();
  r.ranks[1].losses = {2.5, 1.25};
  ScheduleMetrics m = ComputeMetrics(TwoRankSchedule(), r, 3);
  m.ranks_detail[0].overhead_ms = 1;
  m.ranks_detail[1].overhead_ms = 2;
  const ExecutorMetrics e = ComputeExecutorMetrics(TwoRankSchedule(), r, m);
  EXPECT_EQ(e.losses, (std::vector<double>{2.5, 1.25}));
  EXPECT_DOUBLE_EQ(e.overhead_ns_per_op, 3'000'000 / 4.0);  // 3 ms over the 4 ops
  // One step, from the run's start (1 ms) to its last compute op's end (21 ms); the SEND's and
  // RECV's ends do not count.
  EXPECT_EQ(e.step_ms, (std::vector<double>{20.0}));
}

// Step k runs from step k-1's last op end to its own: hand-worked three steps of one rank.
TEST(MetricsTest, StepTimesRunFromOneStepsEndToTheNext) {
  constexpr int64_t kMs = 1'000'000;
  Schedule s;
  s.name = "steps";
  s.shape.ranks = 1;
  s.steps = 3;
  for (int t = 0; t < 3; ++t) {
    s.ops.resize(1);
    s.ops[0].push_back(Op{OpKind::kF, 0, 0, t, 0, -1});
    s.ops[0].push_back(Op{OpKind::kB, 0, 0, t, 0, -1});
    s.ops[0].push_back(Op{OpKind::kStep, 0, 0, t, t + 1, -1});
  }
  RunRecord r;
  r.start_ns = 2 * kMs;
  r.ranks.resize(1);
  // Step 0: 2..10 ms; step 1: F at 11 (1 ms of runtime between steps), ends 25; step 2 ends 31.
  r.ranks[0].ops = {{2 * kMs, 4 * kMs},   {4 * kMs, 8 * kMs},   {8 * kMs, 10 * kMs},
                    {11 * kMs, 13 * kMs}, {13 * kMs, 20 * kMs}, {20 * kMs, 25 * kMs},
                    {25 * kMs, 27 * kMs}, {27 * kMs, 30 * kMs}, {30 * kMs, 31 * kMs}};
  r.end_ns = 31 * kMs;
  const ScheduleMetrics m = ComputeMetrics(s, r, 1);
  EXPECT_EQ(ComputeExecutorMetrics(s, r, m).step_ms, (std::vector<double>{8.0, 15.0, 6.0}));
  r.ranks[0].ops[8] = {};  // the last STEP never ran: only whole steps count
  r.ranks[0].ops[7] = {};
  r.ranks[0].ops[6] = {};
  EXPECT_EQ(ComputeExecutorMetrics(s, r, m).step_ms, (std::vector<double>{8.0, 15.0}));
}

// With 2 replicas (bubble_split_cases.h: one rank, two stages, 11 ms, one STEP waiting 2 ms on
// its REDUCE_GRAD): the throughput counts both replicas' samples, the collective part is its own,
// the parts sum to the makespan, and the trace puts the REDUCE_GRADs on the collective stream.
TEST(MetricsTest, ReplicasFromTheSchedule) {
  test_cases::HandTimeline h = test_cases::ReplicatedTimeline();
  FinishRunRecord(h.s, 0, &h.r);  // busy time, as the simulator and the executor derive it
  const ScheduleMetrics m = ComputeMetrics(h.s, h.r, 3);
  EXPECT_EQ(m.data_parallel, 2);
  EXPECT_NEAR(m.throughput_samples_per_s, 1 * 3 * 2 / 0.011, 1e-6);  // 1 microbatch of 3 samples x 2
  ASSERT_EQ(m.ranks_detail.size(), 1u);
  const RankMetrics& r = m.ranks_detail[0];
  EXPECT_DOUBLE_EQ(r.busy_ms, 8);
  EXPECT_DOUBLE_EQ(r.compute_ms, 8);
  EXPECT_DOUBLE_EQ(r.collective_ms, 2);
  EXPECT_DOUBLE_EQ(r.overhead_ms, 1);
  EXPECT_NEAR(r.compute_ms + r.wait_ms + r.transfer_ms + r.collective_ms + r.overhead_ms + r.idle_ms, m.makespan_ms,
              1e-9);
  EXPECT_NEAR(m.bubble_fraction, 3.0 / 11, 1e-12);  // busy 8 of 11 ms
  const Trace t = BuildTrace(h.s, h.r, "s", "predicted", m);
  int collective = 0;
  for (const TraceOp& op : t.ops) {
    EXPECT_EQ(op.stream == Stream::kCollective, op.op.kind == OpKind::kReduceGrad) << KindName(op.op.kind);
    collective += op.stream == Stream::kCollective;
  }
  EXPECT_EQ(collective, 2);
}

// Throughput as tables print it, worked by hand: 8 samples in a 196 s step is 0.0408 samples/s
// (three significant digits, not "0.0"); a step of no time has no throughput.
TEST(MetricsTest, ThroughputTextKeepsThreeDigitsAndHasNoneForAStepOfNoTime) {
  const auto text = [](double step_ms, double samples_per_s) {
    ScheduleMetrics m;
    m.step_time_ms = step_ms;
    m.throughput_samples_per_s = samples_per_s;
    return ThroughputText(m);
  };
  EXPECT_EQ(text(196000, 8 / 196.0), "0.0408");
  EXPECT_EQ(text(1600, 5.5), "5.50");
  EXPECT_EQ(text(100, 320), "320.0");
  EXPECT_EQ(text(3.6e12, 1 / 3.6e9), "0.000000000278");  // one sample in 10^6 hours: 12 decimals, the most
  EXPECT_EQ(text(0, 0), "-");
}

TEST(MetricsTest, BuildTracePutsOpsOnTheirStreamsRelativeToTheStart) {
  const Schedule s = TwoRankSchedule();
  const RunRecord r = TwoRankRecord();
  const Trace t = BuildTrace(s, r, "scenario", "predicted", ComputeMetrics(s, r, 3));
  EXPECT_EQ(t.scenario, "scenario");
  EXPECT_EQ(t.schedule, "hand");
  EXPECT_EQ(t.microbatches, 2);
  ASSERT_TRUE(t.summary.has_value());
  EXPECT_EQ(t.summary->schedule, "hand");
  ASSERT_EQ(t.ops.size(), 4u);
  EXPECT_EQ(t.ops[1].stream, Stream::kSend);
  EXPECT_EQ(t.ops[1].start_ns, 10'000'000);
  EXPECT_EQ(t.ops[2].stream, Stream::kRecv);
  EXPECT_EQ(t.ops[3].stream, Stream::kCompute);
  EXPECT_EQ(t.ops[3].start_ns, 12'000'000);
  EXPECT_EQ(t.ops[3].duration_ns, 8'000'000);
  ASSERT_EQ(t.counters.size(), 2u);
  EXPECT_EQ(t.counters[0].time_ns, 0);  // before the start: clamped to 0
  EXPECT_EQ(t.counters[1].time_ns, 1'000'000);
}

// Losses 1.0, 0.8, 0.7, 0.5, 0.6 in steps of 10, 20, 30, 40, 50 ms. Target 0.7 over one step: step 2
// (0-based), 60 ms in. Over two steps the means are 0.9, 0.75, 0.6: step 3, 100 ms in. Over three,
// 0.8333, 0.6667 at step 3 (100 ms). Target 0.4: not reached (-1, -1).
TEST(MarkTargetLoss, TheFirstFullWindowAtOrBelowTheTarget) {
  ExecutorMetrics e;
  e.losses = {1.0, 0.8, 0.7, 0.5, 0.6};
  e.step_ms = {10, 20, 30, 40, 50};
  MarkTargetLoss(0.7, 1, &e);
  EXPECT_EQ(e.target_loss, 0.7);
  EXPECT_EQ(e.target_reached_step, 2);
  EXPECT_DOUBLE_EQ(e.time_to_target_ms, 60);
  MarkTargetLoss(0.7, 2, &e);
  EXPECT_EQ(e.target_reached_step, 3);
  EXPECT_DOUBLE_EQ(e.time_to_target_ms, 100);
  MarkTargetLoss(0.7, 3, &e);
  EXPECT_EQ(e.loss_window, 3);
  EXPECT_EQ(e.target_reached_step, 3);
  MarkTargetLoss(0.4, 1, &e);
  EXPECT_EQ(e.target_reached_step, -1);
  EXPECT_EQ(e.time_to_target_ms, -1);
  // A window longer than the run never fills.
  MarkTargetLoss(10.0, 6, &e);
  EXPECT_EQ(e.target_reached_step, -1);
  EXPECT_EQ(TargetText(e), "not reached in 5 step(s)");
  MarkTargetLoss(0.7, 2, &e);
  EXPECT_EQ(TargetText(e), "100.000 ms at step 4");
  EXPECT_EQ(TargetText(ExecutorMetrics{}), "");
}

// A measured trace's summary carries the target fields: the viewer's summary reads them there.
TEST(MarkTargetLoss, ATracesSummaryCarriesThem) {
  ScheduleMetrics m;
  m.schedule = "pipemare";
  m.ranks = 1;
  m.ranks_detail.resize(1);
  m.executor.emplace();
  m.executor->losses = {1.0, 0.5};
  m.executor->step_ms = {10, 20};
  MarkTargetLoss(0.6, 1, &*m.executor);
  const std::optional<ScheduleMetrics> read = test_cases::SummaryThroughATrace(m, "measured");
  ASSERT_TRUE(read && read->executor);
  EXPECT_EQ(TargetText(*read->executor), "30.000 ms at step 2");
}

}  // namespace
}  // namespace stagecraft::schedules
