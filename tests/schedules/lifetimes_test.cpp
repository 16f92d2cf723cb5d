// Tests for schedules/src/lifetimes.cpp: the one lifetime analysis of weight versions, against
// small GPipe, 1F1B and PipeDream op lists worked by hand (positions, readers, peaks, which STEP
// updates in place), and the activations each rank holds (PeakInflight) on the same lists; the
// activation intervals (F to its B or I, I to its W) on ZB-H1 and PipeDream lists worked by hand.
#include "stagecraft/schedules/lifetimes.h"

#include <utility>
#include <vector>

#include <gtest/gtest.h>

#include "stagecraft/schedules/analysis.h"

namespace stagecraft::schedules {
namespace {

Op F(int mb, int v, int stage = 0) { return Op{OpKind::kF, stage, mb, 0, v}; }
Op B(int mb, int v, int stage = 0) { return Op{OpKind::kB, stage, mb, 0, v}; }
Op Step(int v, int stage = 0) { return Op{OpKind::kStep, stage, 0, 0, v}; }
Op Of(OpKind kind, int mb, int step = 0) { return Op{kind, 0, mb, step, 0}; }

// One rank (of `ranks`) holding stage 0, with `ops`; the other ranks empty.
Schedule OneRank(int ranks, std::vector<Op> ops) {
  Schedule s;
  s.shape = Shape{ranks, 1, Placement::kLoop};
  s.ops.assign(static_cast<size_t>(ranks), {});
  s.ops[0] = std::move(ops);
  return s;
}

// GPipe (flush), stage 0 of 2, 2 microbatches, 2 steps: every op of step t reads version t, and
// each STEP is the last reader of its base, so it updates in place and one version is alive.
TEST(WeightLifetimes, GpipeFlushKeepsOneVersionUpdatedInPlace) {
  Schedule s = OneRank(2, {F(0, 0), F(1, 0), B(1, 0), B(0, 0), Step(1), F(0, 1), F(1, 1), B(1, 1), B(0, 1), Step(2)});
  s.steps = 2;
  const WeightLifetimes lives(s, 0);
  const std::vector<VersionLife>& v = lives.Of(0);
  ASSERT_EQ(v.size(), 3u);
  EXPECT_EQ(v[0].produced_at, -1);
  EXPECT_EQ(v[0].compute_readers, 4);
  EXPECT_EQ(v[0].last_compute_read_at, 3);
  EXPECT_EQ(v[0].last_read_at, 4);  // the STEP reads its base
  EXPECT_EQ(v[0].replaced_at, 4);
  EXPECT_EQ(v[1].produced_at, 4);
  EXPECT_EQ(v[1].last_compute_read_at, 8);
  EXPECT_EQ(v[1].replaced_at, 9);
  EXPECT_EQ(v[2].produced_at, 9);
  EXPECT_EQ(v[2].replaced_at, -1);
  EXPECT_TRUE(lives.StepInPlace(4));
  EXPECT_TRUE(lives.StepInPlace(9));
  EXPECT_FALSE(lives.StepInPlace(0));
  EXPECT_EQ(lives.PeakVersions(0), 1);
  EXPECT_EQ(PeakInflight(s.ops[0], s.ops[0].size()), 2);  // GPipe holds all m microbatches
  EXPECT_EQ(Analyze(s)[0].peak_weight_versions, 1);
}

// 1F1B (flush), the last stage (stage 1 of 2) on rank 1: F0 B0 F1 B1 STEP. One microbatch in
// flight, one version.
TEST(WeightLifetimes, OneFOneBLastStageHoldsOneMicrobatch) {
  Schedule s;
  s.shape = Shape{2, 1, Placement::kLoop};
  s.ops = {{}, {F(0, 0, 1), B(0, 0, 1), F(1, 0, 1), B(1, 0, 1), Step(1, 1)}};
  const WeightLifetimes lives(s, 1);
  EXPECT_EQ(lives.Of(1)[0].compute_readers, 4);
  EXPECT_TRUE(lives.StepInPlace(4));
  EXPECT_EQ(lives.PeakVersions(1), 1);
  EXPECT_TRUE(lives.Of(0).empty());
  EXPECT_EQ(lives.PeakVersions(0), 1);  // no ops of that stage here: its one version
  EXPECT_EQ(PeakInflight(s.ops[1], s.ops[1].size()), 1);
}

// PipeDream (stash), stage 0 of 2, 3 microbatches: F0 F1 B0 STEP1 F2 B1 STEP2 B2 STEP3 (F reads
// the newest version, its B the version its F read). Worked by hand, a version lives from its
// STEP to the later of its last reader and its replacement:
//   v0 [start, B1 @5], v1 [STEP1 @3, B2 @7], v2 [STEP2 @6, STEP3 @8], v3 [STEP3 @8, end)
// so at most 2 = n - s versions of stage 0 of n = 2 are alive (DESIGN.md §2), and only STEP3,
// the last reader of its base, updates in place.
TEST(WeightLifetimes, PipeDreamStashKeepsTwoVersionsOnTheFirstOfTwoStages) {
  Schedule s = OneRank(2, {F(0, 0), F(1, 0), B(0, 0), Step(1), F(2, 1), B(1, 0), Step(2), B(2, 1), Step(3)});
  s.weights = WeightPolicy::kStash;
  s.microbatches = 3;
  const WeightLifetimes lives(s, 0);
  const std::vector<VersionLife>& v = lives.Of(0);
  ASSERT_EQ(v.size(), 4u);
  EXPECT_EQ(v[0].last_compute_read_at, 5);
  EXPECT_EQ(v[0].replaced_at, 3);
  EXPECT_EQ(v[1].compute_readers, 2);
  EXPECT_EQ(v[1].last_read_at, 7);
  EXPECT_EQ(v[2].compute_readers, 0);
  EXPECT_EQ(v[2].last_read_at, 8);
  EXPECT_FALSE(lives.StepInPlace(3));
  EXPECT_FALSE(lives.StepInPlace(6));
  EXPECT_TRUE(lives.StepInPlace(8));
  EXPECT_EQ(lives.PeakVersions(0), 2);
  EXPECT_EQ(PeakInflight(s.ops[0], s.ops[0].size()), 2);
}

// ZB-H1's first stage of 2, 3 microbatches: F0 F1 I0 F2 I1 W0 I2 W1 W2. Each F opens its
// microbatch's activations, its I closes them (and opens the weight-gradient stash its W closes):
//   activations [0, 2], [1, 4], [3, 6]; held before each op 0 1 2 1 2 1 1 0 0, then 0;
//   stashes I0..W0, I1..W1, I2..W2: at most 2 at once (after I1, and again after I2).
TEST(ActivationLifetimes, ZeroBubbleIntervalsByHand) {
  const std::vector<Op> ops = {Of(OpKind::kF, 0), Of(OpKind::kF, 1), Of(OpKind::kI, 0),
                               Of(OpKind::kF, 2), Of(OpKind::kI, 1), Of(OpKind::kW, 0),
                               Of(OpKind::kI, 2), Of(OpKind::kW, 1), Of(OpKind::kW, 2)};
  const ActivationLifetimes lives(ops);
  const std::vector<std::pair<int, int>> want = {{0, 2}, {1, 4}, {3, 6}};
  ASSERT_EQ(lives.Activations().size(), want.size());
  for (size_t k = 0; k < want.size(); ++k) {
    EXPECT_EQ(lives.Activations()[k].opened_at, want[k].first) << k;
    EXPECT_EQ(lives.Activations()[k].closed_at, want[k].second) << k;
  }
  const std::vector<int> held = {0, 1, 2, 1, 2, 1, 1, 0, 0, 0};
  for (size_t i = 0; i < held.size(); ++i) EXPECT_EQ(lives.HeldBefore(i), held[i]) << i;
  const std::vector<int> at = {0, 1, 0, 2, 1, -1, 2, -1, -1};
  for (size_t i = 0; i < at.size(); ++i) EXPECT_EQ(lives.ActivationsAt(i), at[i]) << i;
  EXPECT_EQ(lives.PeakPendingW(), 2);
  EXPECT_EQ(PeakInflight(ops, ops.size()), 2);
  EXPECT_EQ(PeakInflight(ops, 1), 1);  // the first op alone
  // Weighted by microbatch + 1: after F1 1 + 2 = 3 (2 held), I0 frees 1, after F2 2 + 3 = 5
  // (2 held): the peak.
  const HeldPeak peak = PeakHeld(ops, ops.size(), [](const Op& op) { return int64_t{op.microbatch + 1}; });
  EXPECT_EQ(peak.weight, 5);
  EXPECT_EQ(peak.inflight, 2);
}

// Without a flush, microbatch 0 of step 1 can start before microbatch 0 of step 0 is done: each
// B closes its own step's interval, not the first open one of the same index. A B with nothing
// of its own open (a list cut short at the front) closes nothing.
TEST(ActivationLifetimes, IntervalsMatchByStepAndMicrobatch) {
  const std::vector<Op> ops = {Of(OpKind::kF, 0, 0), Of(OpKind::kF, 0, 1), Of(OpKind::kB, 0, 1),
                               Of(OpKind::kB, 0, 0), Of(OpKind::kB, 1, 0)};
  const ActivationLifetimes lives(ops);
  ASSERT_EQ(lives.Activations().size(), 2u);
  EXPECT_EQ(lives.Activations()[0].closed_at, 3);  // step 0's, by its B at 3
  EXPECT_EQ(lives.Activations()[1].closed_at, 2);
  EXPECT_EQ(lives.ActivationsAt(4), -1);
  EXPECT_EQ(lives.HeldBefore(4), 0);
  EXPECT_EQ(lives.HeldBefore(5), 0);
  const std::vector<Op> open = {Of(OpKind::kF, 0), Of(OpKind::kF, 1)};
  EXPECT_EQ(ActivationLifetimes(open).Activations()[1].closed_at, -1);  // still held at the end
}

}  // namespace
}  // namespace stagecraft::schedules
