// The learning rate per update (learning_rate.h) against rates worked by hand from DESIGN.md §10's
// rules: a linear warm-up, linear and cosine decay to min_lr, and PipeMare's rescheduling
// α / τ^(1 − min(k/K, 1)) (Yang et al., MLSys'21 §3.1).
#include "stagecraft/exec/learning_rate.h"

#include <gtest/gtest.h>

namespace stagecraft::exec {
namespace {

constexpr double kEps = 1e-12;

sim::LrScheduleSpec Schedule(int64_t warmup, sim::LrDecay decay, double min_lr) { return {warmup, decay, min_lr}; }

TEST(LearningRate, NoScheduleIsTheRateThroughout) {
  for (int64_t k = 0; k < 6; ++k) EXPECT_DOUBLE_EQ(ScheduledRate(0.1, {}, {k, 1, 6}), 0.1);
}

// lr 0.1, 6 steps of one update, warm-up 2 steps, then linear to 0.01 over updates 2..5:
// 0.05, 0.1, then p = 0, 1/4, 2/4, 3/4: 0.1, 0.0775, 0.055, 0.0325.
TEST(LearningRate, WarmupThenLinearDecay) {
  const sim::LrScheduleSpec s = Schedule(2, sim::LrDecay::kLinear, 0.01);
  const double want[] = {0.05, 0.1, 0.1, 0.0775, 0.055, 0.0325};
  for (int64_t k = 0; k < 6; ++k) EXPECT_NEAR(ScheduledRate(0.1, s, {k, 1, 6}), want[k], kEps) << "update " << k;
}

// Cosine from 0.1 to 0.01 over 4 updates after no warm-up: p = 0, 1/4, 2/4, 3/4 gives
// 0.01 + 0.09 · (1 + cos πp) / 2: 0.1, 0.01 + 0.045 (1 + √2/2), 0.055, 0.01 + 0.045 (1 − √2/2).
TEST(LearningRate, CosineDecay) {
  const sim::LrScheduleSpec s = Schedule(0, sim::LrDecay::kCosine, 0.01);
  const double r = 0.70710678118654752;
  const double want[] = {0.1, 0.01 + 0.045 * (1 + r), 0.055, 0.01 + 0.045 * (1 - r)};
  for (int64_t k = 0; k < 4; ++k) EXPECT_NEAR(ScheduledRate(0.1, s, {k, 1, 4}), want[k], kEps) << "update " << k;
}

// An update per microbatch (4 a step): a warm-up of one step is 4 updates, 0.025 apart.
TEST(LearningRate, WarmupCountsStepsOfSeveralUpdates) {
  const sim::LrScheduleSpec s = Schedule(1, sim::LrDecay::kNone, 0);
  const double want[] = {0.025, 0.05, 0.075, 0.1, 0.1};
  for (int64_t k = 0; k < 5; ++k) EXPECT_NEAR(ScheduledRate(0.1, s, {k, 4, 3}), want[k], kEps) << "update " << k;
}

// Delay 4, K = 2 steps of one update: 0.1 / 4, 0.1 / 4^(1/2), then 0.1; a delay of 0 or 1 and
// K = 0 leave the rate alone. With 4 updates a step, update 4 is one step in: 0.1 / 2.
TEST(LearningRate, PipeMareReschedulingStartsDividedByTheDelay) {
  EXPECT_NEAR(RescheduledRate(0.1, 4, 2, {0, 1, 10}), 0.025, kEps);
  EXPECT_NEAR(RescheduledRate(0.1, 4, 2, {1, 1, 10}), 0.05, kEps);
  EXPECT_NEAR(RescheduledRate(0.1, 4, 2, {2, 1, 10}), 0.1, kEps);
  EXPECT_NEAR(RescheduledRate(0.1, 4, 2, {7, 1, 10}), 0.1, kEps);
  EXPECT_NEAR(RescheduledRate(0.1, 4, 2, {4, 4, 10}), 0.05, kEps);
  EXPECT_DOUBLE_EQ(RescheduledRate(0.1, 0, 2, {0, 1, 10}), 0.1);
  EXPECT_DOUBLE_EQ(RescheduledRate(0.1, 1, 2, {0, 1, 10}), 0.1);
  EXPECT_DOUBLE_EQ(RescheduledRate(0.1, 4, 0, {0, 1, 10}), 0.1);
}

}  // namespace
}  // namespace stagecraft::exec
