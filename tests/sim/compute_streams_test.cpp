// Tests for sim/src/compute_streams.cpp: hand-built op lists (F = 1 us, I = 1 us, W = 2 us,
// so B = 3 us) run on their streams, with inputs made ready by hand.
#include "stagecraft/sim/compute_streams.h"

#include "stagecraft/schedules/all_to_all.h"

#include <cmath>
#include <string>
#include <tuple>
#include <vector>

#include <gtest/gtest.h>

#include "sim_test_util.h"

namespace stagecraft::sim {
namespace {

using schedules::Op;
using schedules::OpKind;
using schedules::OpTiming;
using schedules::RunRecord;
using schedules::Schedule;
using testing::kUs;
using testing::Script;
using Log = std::vector<std::tuple<std::string, int, int64_t>>;  // (what, op index, time)

Op Compute(OpKind kind, int microbatch = 0) { return Op{kind, 0, microbatch, 0, 0}; }

// Streams over `ops` (one list per rank, one stage per rank); every input is ready except B's
// while `b_input_ready` is false. Logs every hook call.
class Bench final : public StreamHooks {
 public:
  Bench(std::vector<std::vector<Op>> ops, int64_t step_ns) : streams_(Init(std::move(ops), step_ns)) {}

  bool InputReady(int, int, const Op& op) override { return op.kind != OpKind::kB || b_input_ready; }
  int64_t InputCopyNs(int, const Op& op) override { return op.kind == OpKind::kB ? b_copy_ns : 0; }
  void Posted(int, int index, const Op&) override { log.emplace_back("post", index, loop.now_ns()); }
  void ComputeStarted(int, int index, const Op&, int64_t) override { log.emplace_back("start", index, loop.now_ns()); }
  void ComputeFinished(int, int index, const Op&) override { log.emplace_back("finish", index, loop.now_ns()); }
  bool AllToAllDone(int, int) override { return a2a_done; }

  ComputeStreams& streams() { return streams_; }
  const OpTiming& timing(int rank, int index) const { return record.ranks[rank].ops[index]; }
  // The record with what its timings imply (busy time, first F, last compute end).
  const RunRecord& Finished() {
    schedules::FinishRunRecord(schedule, 0, &record);
    return record;
  }

  Schedule schedule;
  CostTable costs;
  RunRecord record;
  EventLoop loop;
  Script script{&loop};
  bool b_input_ready = true;
  bool a2a_done = true;
  int64_t b_copy_ns = 0;  // the receiver's copy before B
  Log log;

 private:
  ComputeStreams Init(std::vector<std::vector<Op>> ops, int64_t step_ns) {
    schedule.shape.ranks = static_cast<int>(ops.size());
    schedule.ops = std::move(ops);
    for (int r = 0; r < schedule.ranks(); ++r) {
      for (Op& op : schedule.ops[r]) op.stage = r;
    }
    costs = testing::Uniform(schedule.stages(), kUs, kUs, 2 * kUs);
    for (auto& c : costs.stages) c.step_ns = step_ns;
    record.ranks.resize(schedule.ranks());
    for (int r = 0; r < schedule.ranks(); ++r) record.ranks[r].ops.resize(schedule.ops[r].size());
    return ComputeStreams(schedule, costs, &loop, this, &record);
  }

  ComputeStreams streams_;
};

TEST(ComputeStreams, OpDurations) {
  StageCost c{};
  c.forward_ns = 3;
  c.backward_input_ns = 5;
  c.backward_weight_ns = 7;
  c.step_ns = 11;
  c.version_copy_ns = 13;
  EXPECT_EQ(OpDurationNs(c, OpKind::kF), 3);
  EXPECT_EQ(OpDurationNs(c, OpKind::kB), 12);
  EXPECT_EQ(OpDurationNs(c, OpKind::kI), 5);
  EXPECT_EQ(OpDurationNs(c, OpKind::kW), 7);
  EXPECT_EQ(OpDurationNs(c, OpKind::kStep), 11);
  EXPECT_EQ(OpDurationNs(c, OpKind::kStep, /*step_in_place=*/false), 24);  // copy the old version first
  EXPECT_EQ(OpDurationNs(c, OpKind::kF, false), 3);
  for (OpKind k : {OpKind::kSendF, OpKind::kRecvF, OpKind::kSendB, OpKind::kRecvB}) EXPECT_EQ(OpDurationNs(c, k), 0);
}

// F [0,1] B [1,4] STEP [4,9]: back to back, the STEP holding the stream for its 5 us.
TEST(ComputeStreams, RunsOpsBackToBackInIrOrder) {
  Bench bench({{Compute(OpKind::kF), Compute(OpKind::kB), Compute(OpKind::kStep)}}, 5 * kUs);
  bench.streams().Start();
  bench.loop.Run();
  bench.streams().CheckAllDone();
  EXPECT_EQ(bench.timing(0, 0), (OpTiming{0, kUs}));
  EXPECT_EQ(bench.timing(0, 1), (OpTiming{kUs, 4 * kUs}));
  EXPECT_EQ(bench.timing(0, 2), (OpTiming{4 * kUs, 9 * kUs}));
  EXPECT_EQ(bench.log, (Log{{"start", 0, 0},
                            {"finish", 0, kUs},
                            {"start", 1, kUs},
                            {"finish", 1, 4 * kUs},
                            {"start", 2, 4 * kUs},
                            {"finish", 2, 9 * kUs}}));
  EXPECT_EQ(bench.Finished().ranks[0].busy_ns, 9 * kUs);
  EXPECT_EQ(bench.Finished().ranks[0].last_compute_end_ns, 9 * kUs);
  EXPECT_EQ(bench.Finished().ranks[0].first_f_start_ns, 0);
  EXPECT_EQ(bench.loop.events_processed(), 3u);
}

// A 0 ns STEP is the instant [4,4] and needs no event; I [1,2] and W [2,4] are B's halves.
TEST(ComputeStreams, InstantStepNeedsNoEvent) {
  Bench bench({{Compute(OpKind::kF), Compute(OpKind::kI), Compute(OpKind::kW), Compute(OpKind::kStep)}}, 0);
  bench.streams().Start();
  bench.loop.Run();
  EXPECT_EQ(bench.timing(0, 1), (OpTiming{kUs, 2 * kUs}));
  EXPECT_EQ(bench.timing(0, 2), (OpTiming{2 * kUs, 4 * kUs}));
  EXPECT_EQ(bench.timing(0, 3), (OpTiming{4 * kUs, 4 * kUs}));
  EXPECT_EQ(bench.loop.events_processed(), 3u);
  EXPECT_EQ(bench.Finished().ranks[0].busy_ns, 4 * kUs);
}

// SEND/RECV post at once and take no stream time: F0 [0,1], SEND posted at 1, RECV posted at
// 1, F1 [1,2].
TEST(ComputeStreams, SendAndRecvOnlyPost) {
  Bench bench({{Compute(OpKind::kF), Op{OpKind::kSendF, 0, 0, 0, 0, 1}, Op{OpKind::kRecvB, 0, 0, 0, 0, 1},
                Compute(OpKind::kF, 1)}},
              0);
  bench.streams().Start();
  bench.loop.Run();
  EXPECT_EQ(bench.log, (Log{{"start", 0, 0}, {"finish", 0, kUs}, {"post", 1, kUs}, {"post", 2, kUs},
                            {"start", 3, kUs}, {"finish", 3, 2 * kUs}}));
  EXPECT_EQ(bench.timing(0, 1), OpTiming{});  // the streams leave comm timings to the transfers
}

// F [0,1], then B waits for its input: a wake at 5 us finds it still missing, the one at 10 us
// starts B [10,13]. A wake while F runs (0.5 us) does not start anything early.
TEST(ComputeStreams, WaitsForItsInputUntilWoken) {
  Bench bench({{Compute(OpKind::kF), Compute(OpKind::kB)}}, 0);
  bench.b_input_ready = false;
  bench.script.At(kUs / 2, [&] {
    EXPECT_FALSE(bench.streams().waiting(0));
    bench.streams().Wake(0);
  });
  bench.script.At(5 * kUs, [&] {
    EXPECT_TRUE(bench.streams().waiting(0));
    bench.streams().Wake(0);
  });
  bench.script.At(10 * kUs, [&] {
    bench.b_input_ready = true;
    bench.streams().Wake(0);
  });
  bench.streams().Start();
  bench.loop.Run();
  bench.streams().CheckAllDone();
  EXPECT_EQ(bench.timing(0, 0), (OpTiming{0, kUs}));
  EXPECT_EQ(bench.timing(0, 1), (OpTiming{10 * kUs, 13 * kUs}));
  EXPECT_FALSE(bench.streams().waiting(0));
  EXPECT_EQ(bench.Finished().ranks[0].busy_ns, 4 * kUs);
}

// F [0,1], its ALL_TO_ALL posted at F's end; the list waits for it: B (whose input is there)
// starts only when the all-to-all has ended (the wake at 6 us), not at the wake at 3 us.
TEST(ComputeStreams, WaitsForAnAllToAllBeforeGoingOn) {
  const Op f = Compute(OpKind::kF);
  Bench bench({{f, schedules::AllToAllOf(f), Compute(OpKind::kB)}}, 0);
  bench.a2a_done = false;
  bench.script.At(3 * kUs, [&] {
    EXPECT_TRUE(bench.streams().waiting(0));
    bench.streams().Wake(0);
  });
  bench.script.At(6 * kUs, [&] {
    bench.a2a_done = true;
    bench.streams().Wake(0);
  });
  bench.streams().Start();
  bench.loop.Run();
  bench.streams().CheckAllDone();
  EXPECT_EQ(bench.timing(0, 2), (OpTiming{6 * kUs, 9 * kUs}));
  EXPECT_EQ(bench.log, (Log{{"start", 0, 0}, {"finish", 0, kUs}, {"post", 1, kUs}, {"start", 2, 6 * kUs},
                            {"finish", 2, 9 * kUs}}));
}

// Each rank has its own stream: rank 1's F does not wait for rank 0's.
TEST(ComputeStreams, RanksRunInParallel) {
  Bench bench({{Compute(OpKind::kF), Compute(OpKind::kW)}, {Compute(OpKind::kF)}}, 0);
  bench.streams().Start();
  bench.loop.Run();
  EXPECT_EQ(bench.timing(0, 1), (OpTiming{kUs, 3 * kUs}));
  EXPECT_EQ(bench.timing(1, 0), (OpTiming{0, kUs}));
  EXPECT_EQ(bench.Finished().ranks[1].last_compute_end_ns, kUs);
}

// With 100 ns of runtime work per op: F [0,1000]; its 100 ns and the SEND's and RECV's (posted
// at 1000) make the stream free at 1300; B's 200 ns receiver copy puts it at [1500,4500]; the
// 0 ns STEP follows B's 100 ns at 4600.
TEST(ComputeStreams, OpOverheadAndReceiverCopyDelayTheNextOp) {
  Bench bench({{Compute(OpKind::kF), Op{OpKind::kSendF, 0, 0, 0, 0, 1}, Op{OpKind::kRecvB, 0, 0, 0, 0, 1},
                Compute(OpKind::kB), Compute(OpKind::kStep)}},
              0);
  bench.costs.op_overhead_ns = 100;
  bench.b_copy_ns = 200;
  bench.streams().Start();
  bench.loop.Run();
  bench.streams().CheckAllDone();
  EXPECT_EQ(bench.timing(0, 0), (OpTiming{0, kUs}));
  EXPECT_EQ(bench.timing(0, 3), (OpTiming{1500, 4500}));
  EXPECT_EQ(bench.timing(0, 4), (OpTiming{4600, 4600}));  // a 0 ns STEP, after B's overhead
  EXPECT_EQ(bench.Finished().ranks[0].busy_ns, 4 * kUs);       // overhead and copy are not compute
}

// Each rank's own overhead when the table has them: rank 0 F [0,1000], W [1100,3100]; rank 1
// F [0,1000], W [1300,3300].
TEST(ComputeStreams, OverheadPerRank) {
  Bench bench({{Compute(OpKind::kF), Compute(OpKind::kW)}, {Compute(OpKind::kF), Compute(OpKind::kW)}}, 0);
  bench.costs.op_overhead_ns = 50;  // only for ranks the per-rank list does not name
  bench.costs.rank_op_overhead_ns = {100, 300};
  bench.streams().Start();
  bench.loop.Run();
  EXPECT_EQ(bench.timing(0, 1), (OpTiming{1100, 3100}));
  EXPECT_EQ(bench.timing(1, 1), (OpTiming{1300, 3300}));
  bench.costs.rank_op_overhead_ns = {100};
  EXPECT_EQ(bench.costs.OverheadOf(1), 50);
}

// The runtime's work comes after a wait, as the executor's bubble split measures it (overhead is
// the gap after an op's input arrived): B's input comes at 5 us, long after F ended, and B
// starts 100 ns of F's overhead plus its 200 ns copy later.
TEST(ComputeStreams, OverheadFollowsAWait) {
  Bench bench({{Compute(OpKind::kF), Compute(OpKind::kB)}}, 0);
  bench.costs.op_overhead_ns = 100;
  bench.b_copy_ns = 200;
  bench.b_input_ready = false;
  bench.script.At(5 * kUs, [&] {
    bench.b_input_ready = true;
    bench.streams().Wake(0);
  });
  bench.streams().Start();
  bench.loop.Run();
  EXPECT_EQ(bench.timing(0, 1), (OpTiming{5 * kUs + 300, 8 * kUs + 300}));
}

// The op-time draws: exactly 1 without spread; with a CV of 0.1, fixed by (seed, rank, index),
// different for other ranks, indices and seeds, and over 20000 ops of mean 1 and CV 0.1 (a
// log-normal's: each within 2% of the target, far tighter than a wrong sigma would give).
TEST(ComputeStreams, OpTimeFactorIsALogNormalOfMeanOne) {
  EXPECT_EQ(OpTimeFactor(0, 7, 0, 3), 1.0);
  const double a = OpTimeFactor(0.1, 7, 0, 3);
  EXPECT_EQ(a, OpTimeFactor(0.1, 7, 0, 3));
  EXPECT_NE(a, OpTimeFactor(0.1, 7, 1, 3));
  EXPECT_NE(a, OpTimeFactor(0.1, 7, 0, 4));
  EXPECT_NE(a, OpTimeFactor(0.1, 8, 0, 3));
  double sum = 0, sum2 = 0;
  constexpr int kN = 20000;
  for (int i = 0; i < kN; ++i) {
    const double x = OpTimeFactor(0.1, 7, i % 4, i / 4);
    EXPECT_GT(x, 0);
    sum += x;
    sum2 += x * x;
  }
  const double mean = sum / kN;
  const double cv = std::sqrt(sum2 / kN - mean * mean) / mean;
  EXPECT_NEAR(mean, 1.0, 0.02);
  EXPECT_NEAR(cv, 0.1, 0.002);
}

// A stream with op_time_cv runs each op for its cost times its draw (rounded), and counts those
// times as busy: F0 then W0 on one rank, both drawn.
TEST(ComputeStreams, OpsRunForTheirDrawnTimes) {
  Bench bench({{Compute(OpKind::kF), Compute(OpKind::kW)}}, 0);
  bench.costs.op_time_cv = 0.2;
  bench.costs.op_time_seed = 11;
  bench.streams().Start();
  bench.loop.Run();
  const int64_t f = std::llround(kUs * OpTimeFactor(0.2, 11, 0, 0));
  const int64_t w = std::llround(2 * kUs * OpTimeFactor(0.2, 11, 0, 1));
  EXPECT_NE(f, kUs);
  EXPECT_EQ(bench.timing(0, 0), (OpTiming{0, f}));
  EXPECT_EQ(bench.timing(0, 1), (OpTiming{f, f + w}));
  EXPECT_EQ(bench.Finished().ranks[0].busy_ns, f + w);
}

TEST(ComputeStreamsDeathTest, InputThatNeverComesIsADeadlock) {
  Bench bench({{Compute(OpKind::kF), Compute(OpKind::kB)}}, 0);
  bench.b_input_ready = false;
  bench.streams().Start();
  bench.loop.Run();
  EXPECT_TRUE(bench.streams().waiting(0));
  EXPECT_DEATH(bench.streams().CheckAllDone(), "rank 0 stopped at op 1: the schedule deadlocks");
}

}  // namespace
}  // namespace stagecraft::sim
