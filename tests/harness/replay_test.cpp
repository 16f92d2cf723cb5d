// harness/replay.cpp's RestageCosts: a run's per-stage pass times moved to another split of the
// same layers, worked by hand: each layer an equal share of its run stage, each new stage the
// sum of its layers' shares.
#include "stagecraft/harness/replay.h"

#include <vector>

#include <gtest/gtest.h>

#include "stagecraft/base/error.h"

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

}  // namespace
}  // namespace stagecraft::harness
