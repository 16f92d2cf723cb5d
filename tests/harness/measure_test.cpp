// harness/measure.cpp's JoinRankRuns: ranks that read one machine's monotonic clock are put on
// a common origin (a rank that left the set-up 8 ms late no longer sees its input arrive before
// it was sent); a rank on another machine, or one that says nothing of its clock, keeps the
// set-up's alignment. Times worked out by hand from the origins.
#include "stagecraft/harness/measure.h"

#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "../sim/sim_test_util.h"
#include "stagecraft/exec/runtime.h"
#include "stagecraft/schedules/generators.h"
#include "stagecraft/schedules/lower.h"

namespace stagecraft::harness {
namespace {

using schedules::OpTiming;

// 1F1B on 2 ranks, 1 microbatch, lowered: rank 0 F, SEND_F, RECV_B, B, STEP; rank 1 RECV_F, F,
// B, SEND_B, STEP (the op counts are all that matter here).
schedules::Schedule Lowered() {
  schedules::GeneratorParams p;
  p.ranks = 2;
  p.microbatches = 1;
  p.steps = 1;
  return schedules::Lower(schedules::Generate("1f1b", p), schedules::P2p::kLockstep);
}

// A rank run whose ops ran at [10k, 10k + 5] on its own clock (k = op index), one memory sample
// at 3, started at `origin` on clock `id`.
std::string RankBytes(const schedules::Schedule& s, int rank, int64_t origin, const std::string& id) {
  exec::RankRun run;
  for (size_t k = 0; k < s.ops[rank].size(); ++k) {
    run.record.ops.push_back({static_cast<int64_t>(10 * k), static_cast<int64_t>(10 * k + 5)});
  }
  run.record.memory = {{3, 100}};
  run.clock_origin_ns = origin;
  run.clock_id = id;
  return exec::SerializeRankRun(run);
}

TEST(JoinRankRuns, RanksOnOneClockShareTheEarliestOrigin) {
  const schedules::Schedule s = Lowered();
  // Rank 1 started its clock 8000 ns after rank 0: its times move 8000 later.
  const schedules::RunRecord r = JoinRankRuns(s, {RankBytes(s, 0, 50'000, "boot-a"), RankBytes(s, 1, 58'000, "boot-a")}, {});
  EXPECT_EQ(r.ranks[0].ops[1], (OpTiming{10, 15}));
  EXPECT_EQ(r.ranks[1].ops[1], (OpTiming{8010, 8015}));
  EXPECT_EQ(r.ranks[1].memory[0].time_ns, 8003);
  EXPECT_EQ(r.start_ns, 0);
  // Rank 0 late instead: rank 0 moves, so no time is negative (which would read as not run).
  const schedules::RunRecord q = JoinRankRuns(s, {RankBytes(s, 0, 58'000, "boot-a"), RankBytes(s, 1, 50'000, "boot-a")}, {});
  EXPECT_EQ(q.ranks[0].ops[0], (OpTiming{8000, 8005}));
  EXPECT_EQ(q.ranks[1].ops[0], (OpTiming{0, 5}));
}

TEST(JoinRankRuns, OtherMachinesAndUnknownClocksKeepTheSetUpsAlignment) {
  const schedules::Schedule s = Lowered();
  for (const auto& [id1, origin1] : {std::pair<std::string, int64_t>{"boot-b", 58'000}, {"", 58'000}, {"boot-a", -1}}) {
    const schedules::RunRecord r = JoinRankRuns(s, {RankBytes(s, 0, 50'000, "boot-a"), RankBytes(s, 1, origin1, id1)}, {});
    EXPECT_EQ(r.ranks[0].ops[1], (OpTiming{10, 15})) << id1;
    EXPECT_EQ(r.ranks[1].ops[1], (OpTiming{10, 15})) << id1;
  }
}

// Not run ops keep their -1s when their rank is moved.
TEST(JoinRankRuns, OpsThatDidNotRunStayUnrun) {
  const schedules::Schedule s = Lowered();
  exec::RankRun run = exec::ParseRankRun(RankBytes(s, 1, 58'000, "boot-a"));
  run.record.ops.back() = {-1, -1};
  const schedules::RunRecord r =
      JoinRankRuns(s, {RankBytes(s, 0, 50'000, "boot-a"), exec::SerializeRankRun(run)}, {});
  EXPECT_EQ(r.ranks[1].ops.back(), (OpTiming{-1, -1}));
  EXPECT_EQ(r.ranks[1].ops.front(), (OpTiming{8000, 8005}));
}

// execute JSON's model_tflops_per_device is the measured step's: 2 layers of 4 (6 · 2 · 16 = 192
// FLOPs a sample), one sample a step, over one device (both ranks share it); the step is the
// ops' span, 0 to the last op's end on rank 1 (10 · 4 + 5 = 45 ns, rank 0's clock 8000 ns ahead).
TEST(Measure, StatesTheModelFlopsOfTheMeasuredStep) {
  const schedules::Schedule s = Lowered();
  sim::Scenario sc = sim::testing::UnitScenario(2, "1f1b");
  sc.pipeline.microbatches = 1;
  sc.pipeline.ranks_per_device = 2;
  sc.model.mlp = sim::MlpSpec{2, 4};
  const MeasuredSchedule m = Measure(s, sc, {RankBytes(s, 0, 50'000, "boot-a"), RankBytes(s, 1, 58'000, "boot-a")});
  ASSERT_GT(m.metrics.step_time_ms, 0);
  EXPECT_NEAR(m.metrics.step_time_ms, (8000 + 10 * (s.ops[1].size() - 1) + 5) * 1e-6, 1e-12);
  EXPECT_NEAR(m.metrics.model_tflops_per_device, 192 / (m.metrics.step_time_ms * 1e-3) / 1 / 1e12, 1e-12);
  sc.training.dtype = sim::Dtype::kTf32;
  EXPECT_EQ(MeasuredFile(sc, "cuda:0 (NVIDIA H200)", {m}).precision, std::optional<std::string>("tf32"));
}

}  // namespace
}  // namespace stagecraft::harness
