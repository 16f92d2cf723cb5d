// Step graphs (exec/step_graphs.h): the plan against hand-worked op lists and every reason it
// refuses; the dataset windows against hand-worked cycles; and the runtime's capture and replay
// on a cpu device that records calls as CUDA stream capture does (capturing_device.h), against
// the same run issued call by call: bit-identical weights and losses, every op timed, and the
// replayed steps issuing no compute call from the host.
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "capturing_device.h"
#include "step_graph_runs.h"
#include "stagecraft/exec/cpu_device.h"
#include "stagecraft/exec/runtime.h"
#include "stagecraft/exec/step_graphs.h"
#include "stagecraft/schedules/generators.h"
#include "stagecraft/schedules/lower.h"

namespace stagecraft::exec {
namespace {

schedules::Schedule Make(const std::string& name, int ranks, int chunks, int microbatches, int steps) {
  return testing::StepGraphSchedule(name, ranks, chunks, microbatches, steps);
}

StepGraphConditions Allowed() { return StepGraphConditions{.device_has_graphs = true, .requested = true}; }

// 1F1B on one rank, 4 microbatches: F0 B0 F1 B1 F2 B2 F3 B3 STEP each step, the eight passes one
// segment, the STEP issued as it comes.
TEST(StepGraphPlan, OneRankOneF1BIsOneSegmentBeforeItsStep) {
  const schedules::Schedule s = Make("1f1b", 1, 1, 4, 3);
  const StepGraphPlan plan = PlanStepGraphs(s, 0, Allowed());
  ASSERT_TRUE(plan.enabled) << plan.why_not;
  EXPECT_EQ(plan.ops_per_step, 9);
  EXPECT_EQ(plan.segments, 1);
  EXPECT_EQ(plan.capture_step, 1);
  EXPECT_EQ(plan.segment_of, (std::vector<int>{0, 0, 0, 0, 0, 0, 0, 0, -1}));
}

// Two chunks on one rank (stages 0 and 1): 0F0 1F0 1B0 0F1 0B0 ... 1B3 1STEP 0B3 0STEP. Stage 1's
// STEP comes before stage 0's last backward: two segments, the STEPs issued between and after.
TEST(StepGraphPlan, TwoChunksOnOneRankSplitAroundTheFirstStep) {
  const schedules::Schedule s = Make("interleaved", 1, 2, 4, 3);
  const StepGraphPlan plan = PlanStepGraphs(s, 0, Allowed());
  ASSERT_TRUE(plan.enabled) << plan.why_not;
  ASSERT_EQ(plan.ops_per_step, 18);
  EXPECT_EQ(plan.segments, 2);
  std::vector<int> want(18, 0);
  want[15] = -1;
  want[16] = 1;
  want[17] = -1;
  EXPECT_EQ(plan.segment_of, want);
}

TEST(StepGraphPlan, SaysWhyItDoesNotCapture) {
  const schedules::Schedule one = Make("1f1b", 1, 1, 4, 3);
  const auto why = [&](const schedules::Schedule& s, StepGraphConditions c) {
    const StepGraphPlan plan = PlanStepGraphs(s, 0, c);
    EXPECT_FALSE(plan.enabled);
    EXPECT_TRUE(plan.segment_of.empty());
    return plan.why_not;
  };
  StepGraphConditions c = Allowed();
  c.requested = false;
  EXPECT_NE(why(one, c).find("--graphs on"), std::string::npos);
  c = Allowed();
  c.device_has_graphs = false;
  EXPECT_NE(why(one, c).find("no graphs"), std::string::npos);
  c = Allowed();
  c.replicas = true;
  EXPECT_NE(why(one, c).find("replicas"), std::string::npos);
  c = Allowed();
  c.optimizer_on_host = true;
  EXPECT_NE(why(one, c).find("host"), std::string::npos);
  c = Allowed();
  c.pipemare = true;
  EXPECT_NE(why(one, c).find("PipeMare"), std::string::npos);
  c = Allowed();
  c.faults = true;
  EXPECT_NE(why(one, c).find("fault"), std::string::npos);
  // Rank 0 of a two-rank 1F1B sends its activations over a transport that does not record them:
  // named by its first transfer.
  EXPECT_NE(why(Make("1f1b", 2, 1, 4, 3), Allowed()).find("0SEND_F0"), std::string::npos);
  EXPECT_NE(why(Make("1f1b", 2, 1, 4, 3), Allowed()).find("on the host"), std::string::npos);
  EXPECT_NE(why(Make("pipedream", 1, 1, 4, 3), Allowed()).find("weight policy"), std::string::npos);
  EXPECT_NE(why(Make("1f1b", 1, 1, 4, 2), Allowed()).find("2 steps"), std::string::npos);
}

// Over a transport that records its transfers (nccl), rank 0 of a two-rank 1F1B with 4
// microbatches is captured: each microbatch's forward sends its activation and its backward
// receives a gradient, all of them and the 8 passes one segment, the STEP issued as it comes.
TEST(StepGraphPlan, RecordedTransfersJoinTheirPassesSegment) {
  const schedules::Schedule s = Make("1f1b", 2, 1, 4, 3);
  StepGraphConditions c = Allowed();
  c.transfers_captured = true;
  for (int rank = 0; rank < 2; ++rank) {
    const StepGraphPlan plan = PlanStepGraphs(s, rank, c);
    ASSERT_TRUE(plan.enabled) << plan.why_not;
    ASSERT_EQ(plan.ops_per_step, 8 + 4 + 4 + 1) << "rank " << rank;
    EXPECT_EQ(plan.segments, 1);
    int sends = 0, recvs = 0;
    for (int k = 0; k < plan.ops_per_step; ++k) {
      const schedules::Op& op = s.ops[rank][k];
      EXPECT_EQ(plan.segment_of[k], schedules::ProducesVersion(op.kind) ? -1 : 0) << k;
      sends += schedules::IsSend(op.kind);
      recvs += schedules::IsRecv(op.kind);
    }
    EXPECT_EQ(sends, 4);
    EXPECT_EQ(recvs, 4);
  }
  // Data parallelism still needs the host each step, with transfers recorded or not.
  c.replicas = true;
  EXPECT_FALSE(PlanStepGraphs(s, 0, c).enabled);
}

// A pipeline is captured on every rank or on none: rank 1's steps made to differ leave rank 0,
// whose own list could be captured, uncaptured too, naming rank 1; a fault on any rank does too.
TEST(StepGraphPlan, APipelineIsCapturedOnEveryRankOrNone) {
  schedules::Schedule s = Make("1f1b", 2, 1, 4, 3);
  StepGraphConditions c = Allowed();
  c.transfers_captured = true;
  const size_t per_step = s.ops[1].size() / 3;
  std::swap(s.ops[1][per_step + 1], s.ops[1][per_step + 2]);  // step 1 of rank 1 not in step 0's order
  const StepGraphPlan rank0 = PlanStepGraphs(s, 0, c);
  EXPECT_FALSE(rank0.enabled);
  EXPECT_NE(rank0.why_not.find("rank 1 is not captured"), std::string::npos) << rank0.why_not;
  EXPECT_FALSE(PlanStepGraphs(s, 1, c).enabled);
  c.faults = true;
  EXPECT_NE(PlanStepGraphs(Make("1f1b", 2, 1, 4, 3), 0, c).why_not.find("fault"), std::string::npos);
}

// A list whose steps differ is refused, naming the first op that differs.
TEST(StepGraphPlan, StepsThatDifferAreNotReplayed) {
  schedules::Schedule s = Make("1f1b", 1, 1, 4, 3);
  std::swap(s.ops[0][9], s.ops[0][10]);  // step 1 starts B0 F0
  const StepGraphPlan plan = PlanStepGraphs(s, 0, Allowed());
  EXPECT_FALSE(plan.enabled);
  EXPECT_NE(plan.why_not.find("op 9"), std::string::npos) << plan.why_not;
}

// Dataset windows, worked by hand: slot j holds dataset microbatch (first + j) mod D.
TEST(StepGraphWindows, CopyRunsOfConsecutiveDatasetMicrobatches) {
  EXPECT_EQ(WindowCopies(0, 4, 8), (std::vector<WindowCopy>{{0, 0, 4}}));
  EXPECT_EQ(WindowCopies(6, 4, 8), (std::vector<WindowCopy>{{6, 0, 2}, {0, 2, 2}}));
  EXPECT_EQ(WindowCopies(2, 7, 3), (std::vector<WindowCopy>{{2, 0, 1}, {0, 1, 3}, {0, 4, 3}}));
  EXPECT_EQ(WindowCopies(12, 4, 4), (std::vector<WindowCopy>{{0, 0, 4}}));
  EXPECT_TRUE(WindowCopies(0, 0, 4).empty());
}

// 1F1B on one rank, 2 microbatches, 2 steps: F0 B0 F1 B1 STEP twice, the passes one segment.
// Hand-made stamps: gaps 2, 0, 5, 1 in step 0 (F1 starts as B0 ends); in step 1 3 after the
// STEP before, then 0, 0 (F1 starts before B0's end: no negative gap), 1, and 10 before the
// STEP.
TEST(StepIdle, GapsBetweenComputeOpsFromAStepOnAndThoseInsideSegments) {
  const schedules::Schedule s = Make("1f1b", 1, 1, 2, 2);
  ASSERT_EQ(s.ops[0].size(), 10u);
  const std::vector<schedules::OpTiming> t = {{0, 10},  {12, 20}, {20, 30}, {35, 40}, {41, 50},
                                              {53, 60}, {60, 70}, {69, 80}, {81, 90}, {100, 110}};
  // The plan a longer run of the same steps gets (PlanStepGraphs wants 3 steps or more).
  const StepGraphPlan plan{
      .enabled = true, .why_not = "", .ops_per_step = 5, .segment_of = {0, 0, 0, 0, -1}, .segments = 1};
  ASSERT_EQ(PlanStepGraphs(Make("1f1b", 1, 1, 2, 3), 0, Allowed()).segment_of, plan.segment_of);
  const StepIdle later = IdleBetweenOps(s.ops[0], t, plan, 1);
  EXPECT_EQ(later.ops, 5);
  EXPECT_EQ(later.idle_ns, 3 + 0 + 0 + 1 + 10);
  EXPECT_EQ(later.passes, 3) << "B0, F1 and B1 follow a pass of their segment; F0 follows a STEP";
  EXPECT_EQ(later.pass_idle_ns, 1);
  const StepIdle all = IdleBetweenOps(s.ops[0], t, plan, 0);
  EXPECT_EQ(all.ops, 9) << "the run's first op has no gap before it";
  EXPECT_EQ(all.idle_ns, 2 + 0 + 5 + 1 + 14);
  EXPECT_EQ(all.passes, 6);
  EXPECT_EQ(all.pass_idle_ns, 2 + 0 + 5 + 1);
  // Without a plan nothing is inside a segment; an op not timed is passed over (its neighbours'
  // gap measured across it).
  std::vector<schedules::OpTiming> untimed = t;
  untimed[8] = {-1, -1};
  const StepIdle eager = IdleBetweenOps(s.ops[0], untimed, StepGraphPlan{}, 1);
  EXPECT_EQ(eager.ops, 4);
  EXPECT_EQ(eager.idle_ns, 3 + 0 + 0 + 20);
  EXPECT_EQ(eager.passes, 0);
}

constexpr int kMicrobatches = 4, kSteps = 5;

TrainingConfig Mlp(int stages) { return testing::StepGraphConfig(false, stages, 4 / stages); }
TrainingConfig Gpt(int stages) { return testing::StepGraphConfig(true, stages, 2 / stages); }

RankRun RunOn(testing::CapturingCpuDevice& device, const schedules::Schedule& s, const TrainingConfig& config,
              bool graphs) {
  return testing::RunStepGraphs(device, s, config, graphs, [&] {
    device.direct_calls = 0;  // the MLP's teacher made the targets with a GEMM
    device.direct_updates = 0;
  });
}

struct Case {
  std::string schedule;
  int chunks = 1;
  bool gpt = false;
};

class StepGraphRuns : public ::testing::TestWithParam<Case> {};

TEST_P(StepGraphRuns, ReplayTrainsBitForBitAsIssuingEachCall) {
  const Case& c = GetParam();
  const schedules::Schedule s = Make(c.schedule, 1, c.chunks, kMicrobatches, kSteps);
  const TrainingConfig config = c.gpt ? Gpt(s.stages()) : Mlp(s.stages());
  testing::CapturingCpuDevice eager_device, graph_device;
  const RankRun eager = RunOn(eager_device, s, config, false);
  const RankRun replayed = RunOn(graph_device, s, config, true);

  ASSERT_EQ(eager.final_params.size(), replayed.final_params.size());
  for (size_t chunk = 0; chunk < eager.final_params.size(); ++chunk) {
    EXPECT_EQ(eager.final_params[chunk], replayed.final_params[chunk]) << "chunk " << chunk;
  }
  EXPECT_EQ(eager.record.losses, replayed.record.losses);
  ASSERT_EQ(replayed.record.losses.size(), static_cast<size_t>(kSteps));
  // Every step's losses differ from the last: each replay read its own step's microbatches.
  for (int t = 1; t < kSteps; ++t) EXPECT_NE(replayed.record.losses[t], replayed.record.losses[t - 1]);

  // Eagerly, every call is issued by the host and nothing is recorded.
  EXPECT_EQ(eager_device.recorded_calls, 0);
  EXPECT_EQ(eager_device.launches, 0);
  const int64_t per_step = eager_device.direct_calls / kSteps;
  ASSERT_EQ(per_step * kSteps, eager_device.direct_calls);
  // With graphs: step 0 issued, step 1 recorded once, steps 2-4 launched; the optimizer's
  // updates issued every step.
  const StepGraphPlan plan = PlanStepGraphs(s, 0, Allowed());
  EXPECT_EQ(graph_device.direct_calls, per_step);
  EXPECT_EQ(graph_device.recorded_calls, per_step);
  EXPECT_EQ(graph_device.launches, int64_t{plan.segments} * (kSteps - 1));
  EXPECT_EQ(graph_device.direct_updates, eager_device.direct_updates);
  EXPECT_EQ(graph_device.graph_blocks_taken_outside, 0);

  // Every compute op and STEP has its time, in order on the rank's one stream.
  testing::ExpectOpsTimedInOrder(s, replayed);
}

INSTANTIATE_TEST_SUITE_P(StepGraphs, StepGraphRuns,
                         ::testing::Values(Case{"1f1b"}, Case{"gpipe"}, Case{"zb-h1"}, Case{"interleaved", 2},
                                           Case{"1f1b", 1, true}, Case{"zb-h1", 1, true}),
                         [](const ::testing::TestParamInfo<Case>& p) {
                           return testing::StepGraphCaseName(p.param.schedule + (p.param.gpt ? "_gpt" : "_mlp"));
                         });

// A schedule the plan refuses runs as it comes on a device with graphs: nothing recorded.
TEST(StepGraphRuns, ARefusedScheduleIssuesEveryCall) {
  const schedules::Schedule s = Make("1f1b", 1, 1, kMicrobatches, 2);
  testing::CapturingCpuDevice device;
  const RankRun run = RunOn(device, s, Mlp(1), true);
  EXPECT_EQ(device.recorded_calls, 0);
  EXPECT_EQ(device.launches, 0);
  EXPECT_EQ(run.record.losses.size(), 2u);
}

}  // namespace
}  // namespace stagecraft::exec
