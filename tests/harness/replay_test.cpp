// harness/replay.cpp's RestageCosts: a run's per-stage pass times moved to another split of the
// same layers, worked by hand: each layer an equal share of its run stage, each new stage the
// sum of its layers' shares.
#include "stagecraft/harness/replay.h"

#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "stagecraft/base/error.h"
#include "stagecraft/schedules/generators.h"
#include "stagecraft/schedules/lower.h"
#include "stagecraft/sim/cost_table.h"

namespace stagecraft::harness {
namespace {

using schedules::StageCostMetrics;

StageCostMetrics Passes(double f, double b, double step) {
  StageCostMetrics m;
  m.forward_ms = f;
  m.backward_ms = b;
  m.step_ms = step;
  return m;
}

// Run: stage 0 holds 3 layers (F 6, B 12, STEP 3: per layer 2, 4, 1), stage 1 holds 1 (F 5, B 8,
// STEP 2, its loss included). New split 1 / 2 / 1: stage 0 one share of run stage 0 (2, 4, 1),
// stage 1 two (4, 8, 2), stage 2 all of run stage 1 (5, 8, 2). I and W were not run: 0.
TEST(RestageCosts, EachLayerTakesAnEqualShareOfItsRunStage) {
  const std::vector<StageCostMetrics> run = {Passes(6, 12, 3), Passes(5, 8, 2)};
  const std::vector<StageCostMetrics> out = RestageCosts(run, {3, 1}, {1, 2, 1});
  ASSERT_EQ(out.size(), 3u);
  EXPECT_EQ(out[0], Passes(2, 4, 1));
  EXPECT_EQ(out[1], Passes(4, 8, 2));
  EXPECT_EQ(out[2], Passes(5, 8, 2));
  // Fewer stages: one stage sums all.
  EXPECT_EQ(RestageCosts(run, {3, 1}, {4}).at(0), Passes(11, 20, 5));
  // The same split gives the run back.
  EXPECT_EQ(RestageCosts(run, {3, 1}, {3, 1}), run);
}

TEST(RestageCosts, AnotherLayerCountIsRefused) {
  const std::vector<StageCostMetrics> run = {Passes(6, 12, 3), Passes(5, 8, 2)};
  EXPECT_THROW(RestageCosts(run, {3, 1}, {3, 3}), InputError);
  EXPECT_THROW(RestageCosts(run, {4}, {2, 2}), InputError);  // not one count per run stage
}

// ReplayCosts for a what-if: the run (a 1F1B, B only) gives each pass's level, the cost model
// how the pass changes from the schedule that ran to this one. Worked by hand: the run's F 20,
// B 22 and STEP 16 ms; the model's table for the what-if (ZB-H1) F 10, I 6, W 4, STEP 5, and
// for the schedule that ran F 10, the same I and W but a fused B of 11, STEP 8. So F 20, I 22 x
// 6 / 11 = 12, W 22 x 4 / 11 = 8, a fused B 22 x 10 / 11 = 20 and STEP 16 x 5 / 8 = 10. Without
// the ran schedule's table the model's own split of the measured B: I 13.2, W 8.8.
// `name` on 2 ranks, 2 microbatches, 1 step, lowered.
schedules::Schedule TwoRanks(const std::string& name) {
  schedules::GeneratorParams p;
  p.ranks = 2;
  p.microbatches = 2;
  p.steps = 1;
  return schedules::Lower(schedules::Generate(name, p), schedules::P2p::kLockstep);
}

TEST(ReplayCosts, AWhatIfScalesTheRunsPassesByTheModelsChangeBetweenSchedules) {
  const schedules::Schedule zb = TwoRanks("zb-h1");
  const auto table = [](int64_t fused, int64_t step) {
    sim::CostTable t;
    sim::StageCost c;
    c.forward_ns = 10, c.backward_input_ns = 6, c.backward_weight_ns = 4, c.fused_backward_ns = fused;
    c.step_ns = step;
    t.stages = {c, c};
    return t;
  };
  schedules::ScheduleMetrics run;
  run.stage_costs = {Passes(20, 22, 16), Passes(20, 22, 16)};
  const sim::CostTable ran_model = table(11, 8);
  const sim::CostTable what_if = ReplayCosts(zb, table(0, 5), run, "t.json", nullptr, {}, &ran_model);
  for (const sim::StageCost& c : what_if.stages) {
    EXPECT_EQ(c.forward_ns, 20'000'000);
    EXPECT_EQ(c.backward_input_ns, 12'000'000);
    EXPECT_EQ(c.backward_weight_ns, 8'000'000);
    EXPECT_EQ(c.fused_backward_ns, 20'000'000);
    EXPECT_EQ(c.step_ns, 10'000'000);
  }
  const sim::CostTable alone = ReplayCosts(zb, table(0, 5), run, "t.json", nullptr, {});
  EXPECT_EQ(alone.stages[0].backward_input_ns, 13'200'000);
  EXPECT_EQ(alone.stages[0].backward_weight_ns, 8'800'000);
  EXPECT_EQ(alone.stages[0].fused_backward_ns, 22'000'000);
  EXPECT_EQ(alone.stages[0].step_ns, 16'000'000);
}

// A run whose two ranks shared a device replays each op with its own device time: rank 0's F0
// [0, 100] beside rank 1's F0 [50, 150] had 75 each (WithoutSharing), since the simulator
// time-slices the replay's shared device itself; with a device each the measured 100 stands.
TEST(ReplayCosts, OpsOfASharedDeviceReplayTheirOwnDeviceTime) {
  const schedules::Schedule s = TwoRanks("gpipe");
  schedules::RunRecord record;
  record.ranks.resize(2);
  for (int r = 0; r < 2; ++r) record.ranks[r].ops.resize(s.ops[r].size());
  const auto first_f = [&](int r) {
    for (size_t i = 0; i < s.ops[r].size(); ++i) {
      if (s.ops[r][i].kind == schedules::OpKind::kF) return i;
    }
    return s.ops[r].size();
  };
  record.ranks[0].ops[first_f(0)] = {0, 100};
  record.ranks[1].ops[first_f(1)] = {50, 150};
  sim::CostTable base;
  base.stages.resize(2);
  schedules::ScheduleMetrics run;
  run.stage_costs = {Passes(1, 2, 0), Passes(1, 2, 0)};
  const sim::CostTable shared = ReplayCosts(s, base, run, "t.json", &record, {}, nullptr, {0, 0});
  EXPECT_EQ(shared.op_ns[0][first_f(0)], 75);
  EXPECT_EQ(shared.op_ns[1][first_f(1)], 75);
  const sim::CostTable apart = ReplayCosts(s, base, run, "t.json", &record, {}, nullptr, {});
  EXPECT_EQ(apart.op_ns[0][first_f(0)], 100);
  EXPECT_EQ(apart.op_ns[1][first_f(1)], 100);
}

// A transfer between two ranks of one device: rank 0's SEND_F0 posted at 100, rank 1's RECV_F0
// done at 300, rank 0 computing F1 over [150, 250] meanwhile. Where copies hold the device's
// compute (a CPU core: `transfer_devices` names the shared device) the transfer waited 100 of
// its 200 for that F1, which the simulator gives again: 100. Where a copy engine carries it (a
// GPU: none named) the run's 200 stands, as a run on one H200 showed (harness/src/replay.cpp).
TEST(ReplayCosts, ATransferOnASharedDeviceLosesTheOtherRanksComputeOnlyWhereCopiesHoldIt) {
  const schedules::Schedule s = TwoRanks("gpipe");
  schedules::RunRecord record;
  record.ranks.resize(2);
  for (int r = 0; r < 2; ++r) record.ranks[r].ops.resize(s.ops[r].size());
  const auto nth = [&](int r, schedules::OpKind kind, int n) {
    for (size_t i = 0; i < s.ops[r].size(); ++i) {
      if (s.ops[r][i].kind == kind && n-- == 0) return i;
    }
    return s.ops[r].size();
  };
  const size_t send = nth(0, schedules::OpKind::kSendF, 0);
  ASSERT_EQ(s.ops[0][send].microbatch, 0);
  ASSERT_EQ(s.ops[1][nth(1, schedules::OpKind::kRecvF, 0)].microbatch, 0);
  record.ranks[0].ops[nth(0, schedules::OpKind::kF, 0)] = {0, 100};
  record.ranks[0].ops[send] = {100, 110};
  record.ranks[0].ops[nth(0, schedules::OpKind::kF, 1)] = {150, 250};
  record.ranks[1].ops[nth(1, schedules::OpKind::kRecvF, 0)] = {0, 300};
  sim::CostTable base;
  base.stages.resize(2);
  schedules::ScheduleMetrics run;
  run.stage_costs = {Passes(1, 2, 0), Passes(1, 2, 0)};
  const sim::CostTable on_a_core = ReplayCosts(s, base, run, "t.json", &record, {}, nullptr, {0, 0}, {0, 0});
  EXPECT_EQ(on_a_core.transfer_ns[0][send], 100);
  const sim::CostTable beside = ReplayCosts(s, base, run, "t.json", &record, {}, nullptr, {0, 0}, {});
  EXPECT_EQ(beside.transfer_ns[0][send], 200);
}

}  // namespace
}  // namespace stagecraft::harness
