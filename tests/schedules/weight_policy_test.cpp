// Tests for the weight-policy table (weight_policy.h) against DESIGN.md §2, stated by hand:
// updates per step (PipeDream: one per microbatch; flush and 2BW: one), the version each step
// reads (flush: t; 2BW: max(t - 1, 0)), and the STEPs AssignWeights makes for small schedules.
#include "stagecraft/schedules/weight_policy.h"

#include <map>

#include <gtest/gtest.h>

#include "generator_cases.h"
#include "stagecraft/schedules/generators.h"
#include "stagecraft/schedules/validate.h"

namespace stagecraft::schedules {
namespace {

using test_cases::Params;

TEST(WeightPolicy, UpdatesPerStepAndVersionsAsDesignStatesThem) {
  EXPECT_EQ(UpdatesPerStep(WeightPolicy::kFlush, 4), 1);
  EXPECT_EQ(UpdatesPerStep(WeightPolicy::kTwoBW, 4), 1);
  EXPECT_EQ(UpdatesPerStep(WeightPolicy::kStash, 4), 4);
  // 2BW: global microbatch k (1-indexed) of m per step reads max(floor((k-1)/m) - 1, 0).
  EXPECT_EQ(VersionOfStep(WeightPolicy::kTwoBW, 0), 0);
  EXPECT_EQ(VersionOfStep(WeightPolicy::kTwoBW, 1), 0);
  EXPECT_EQ(VersionOfStep(WeightPolicy::kTwoBW, 3), 2);
  EXPECT_EQ(VersionOfStep(WeightPolicy::kFlush, 3), 3);
  // Update indices: step 1, microbatch 2 of 4 feeds update 6 under stashing, else update 1.
  EXPECT_EQ(UpdateOf(WeightPolicy::kStash, 4, 1, 2), 6);
  EXPECT_EQ(UpdateOf(WeightPolicy::kFlush, 4, 1, 2), 1);
  // Versions alive (DESIGN.md §2): flush one, PipeDream n - s, 2BW at most 2.
  EXPECT_FALSE(PolicyInfo(WeightPolicy::kFlush).stashes_versions);
  EXPECT_TRUE(PolicyInfo(WeightPolicy::kStash).stashes_versions);
  EXPECT_TRUE(PolicyInfo(WeightPolicy::kTwoBW).stashes_versions);
  EXPECT_TRUE(TrainsAsSequential(WeightPolicy::kFlush));
  EXPECT_FALSE(TrainsAsSequential(WeightPolicy::kStash));
  EXPECT_FALSE(TrainsAsSequential(WeightPolicy::kTwoBW));
  for (const WeightPolicyInfo& row : kWeightPolicies) {
    WeightPolicy parsed = WeightPolicy::kFlush;
    EXPECT_TRUE(ParsePolicy(row.name, &parsed));
    EXPECT_EQ(parsed, row.policy);
    EXPECT_EQ(PolicyName(row.policy), row.name);
  }
}

// STEPs per stage, counted: 2 ranks, 3 microbatches, 2 steps. PipeDream steps after every
// microbatch (6), the others once per step (2); each validates.
TEST(WeightPolicy, GeneratedSchedulesStepAsTheirPolicySays) {
  const std::map<const char*, int> want = {{"gpipe", 2}, {"1f1b", 2}, {"2bw", 2}, {"pipedream", 6}};
  for (const auto& [name, steps_per_stage] : want) {
    SCOPED_TRACE(name);
    const Schedule s = Generate(name, Params(2, 3, 2));
    std::map<int, int> steps;
    for (const auto& ops : s.ops) {
      for (const Op& op : ops) steps[op.stage] += op.kind == OpKind::kStep ? 1 : 0;
    }
    EXPECT_EQ(steps[0], steps_per_stage);
    EXPECT_EQ(steps[1], steps_per_stage);
    EXPECT_EQ(s.steps * UpdatesPerStep(s.weights, s.microbatches), steps_per_stage);
    EXPECT_TRUE(Validate(s).empty());
  }
}

}  // namespace
}  // namespace stagecraft::schedules
