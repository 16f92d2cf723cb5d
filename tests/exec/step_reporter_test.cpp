// The last stage's per-step report (exec/src/step_reporter.cpp) on the cpu device: which op ends
// each step, which rank reports, a step reported once its end op has a time (in order, once,
// with the mean of its losses), and a non-finite loss ending the run with its step and microbatch.
#include <gtest/gtest.h>

#include <limits>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "stagecraft/exec/cpu_device.h"
#include "stagecraft/exec/step_reporter.h"
#include "stagecraft/schedules/generators.h"
#include "stagecraft/schedules/lower.h"

namespace stagecraft::exec {
namespace {

using schedules::Op;
using schedules::OpKind;

schedules::Schedule TwoRanks(int microbatches, int steps) {
  schedules::GeneratorParams p;
  p.ranks = 2;
  p.microbatches = microbatches;
  p.steps = steps;
  return schedules::Lower(schedules::Generate("1f1b", p));
}

TEST(StepEnds, TheLastStagesLastStepOfEachStep) {
  const std::vector<Op> ops = {
      {.kind = OpKind::kF, .stage = 1},       {.kind = OpKind::kStep, .stage = 0, .step = 0},
      {.kind = OpKind::kStep, .stage = 1},    {.kind = OpKind::kF, .stage = 1, .step = 1},
      {.kind = OpKind::kStep, .stage = 1, .step = 1}, {.kind = OpKind::kStep, .stage = 0, .step = 1}};
  EXPECT_EQ(StepEnds(ops, 2, 1), (std::vector<int>{2, 4}));
  EXPECT_EQ(StepEnds(ops, 3, 2), (std::vector<int>{-1, -1, -1}));
}

TEST(StepReporter, OnlyTheLastStagesRankHoldsAndReportsLosses) {
  const schedules::Schedule s = TwoRanks(3, 2);
  auto device = MakeCpuDevice();
  int calls = 0;
  const RunHooks::StepFn count = [&](const StepProgress&) { ++calls; };
  StepReporter first(s, 0, *device, 1.0f, count);
  EXPECT_FALSE(first.active());
  EXPECT_EQ(first.bytes(), 0);
  StepReporter last(s, 1, *device, 1.0f, count);
  EXPECT_TRUE(last.active());
  EXPECT_EQ(last.bytes(), 2 * 3 * static_cast<int64_t>(sizeof(float)));

  schedules::RankRecord done;
  done.ops.assign(s.ops[0].size(), schedules::OpTiming{0, 1});
  first.Report(done);
  EXPECT_EQ(calls, 0);
  EXPECT_TRUE(first.MeanLosses().empty());
}

TEST(StepReporter, AStepIsReportedOnceItsEndOpHasRun) {
  const schedules::Schedule s = TwoRanks(3, 2);
  auto device = MakeCpuDevice();
  std::vector<StepProgress> heard;
  const RunHooks::StepFn hear = [&](const StepProgress& p) { heard.push_back(p); };
  StepReporter reporter(s, 1, *device, 1.0f, hear);
  // Microbatch k of step t lost 10·t + k.
  for (const Op& op : s.ops[1]) {
    if (op.kind == OpKind::kF)
      device->memory().Fill(reporter.LossOf(op), static_cast<float>(10 * op.step + op.microbatch), 1);
  }
  schedules::RankRecord record;
  record.ops.assign(s.ops[1].size(), schedules::OpTiming{});
  const std::vector<int>& ends = reporter.step_ends();
  ASSERT_EQ(ends.size(), 2u);
  reporter.Report(record);
  EXPECT_TRUE(heard.empty()) << "no step is over yet";

  record.ops[ends[1]] = {50, 60};  // step 1's end alone: step 0 is reported first
  reporter.Report(record);
  EXPECT_TRUE(heard.empty());
  record.ops[ends[0]] = {30, 40};
  reporter.Report(record);
  reporter.Report(record);  // nothing new
  ASSERT_EQ(heard.size(), 2u);
  EXPECT_EQ(heard[0].step, 0);
  EXPECT_EQ(heard[0].steps, 2);
  EXPECT_DOUBLE_EQ(heard[0].loss, 1.0);  // (0 + 1 + 2) / 3
  EXPECT_EQ(heard[0].end_ns, 40);
  EXPECT_EQ(heard[1].step, 1);
  EXPECT_DOUBLE_EQ(heard[1].loss, 11.0);
  EXPECT_EQ(heard[1].end_ns, 60);
  EXPECT_EQ(reporter.reported(), 2);
  EXPECT_EQ(reporter.MeanLosses(), (std::vector<double>{1.0, 11.0}));
}

TEST(StepReporter, ANonFiniteLossEndsTheRunNamingItsStepAndMicrobatch) {
  const schedules::Schedule s = TwoRanks(3, 1);
  for (const float loss_scale : {1.0f, 4096.0f}) {
    auto device = MakeCpuDevice();
    StepReporter reporter(s, 1, *device, loss_scale, {});
    for (const Op& op : s.ops[1]) {
      if (op.kind != OpKind::kF) continue;
      device->memory().Fill(reporter.LossOf(op), op.microbatch == 1 ? std::numeric_limits<float>::quiet_NaN() : 0.5f,
                            1);
    }
    schedules::RankRecord record;
    record.ops.assign(s.ops[1].size(), schedules::OpTiming{});
    record.ops[reporter.step_ends()[0]] = {1, 2};
    try {
      reporter.Report(record);
      FAIL() << "a nan loss ends the run";
    } catch (const std::runtime_error& e) {
      const std::string what = e.what();
      EXPECT_NE(what.find("step 0 microbatch 1: loss is nan; training diverged (lower training.lr"), std::string::npos)
          << what;
      EXPECT_EQ(what.find("training.loss_scale") != std::string::npos, loss_scale > 1.0f) << what;
    }
  }
}

}  // namespace
}  // namespace stagecraft::exec
