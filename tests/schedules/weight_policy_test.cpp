// Tests for the weight-policy table (weight_policy.h) against DESIGN.md §2, stated by hand:
// updates per step (PipeDream: one per microbatch; flush and 2BW: one), the version each step
// reads (flush: t; 2BW: max(t - 1, 0)), and the STEPs AssignWeights makes for small schedules.
#include "stagecraft/schedules/weight_policy.h"

#include <map>

#include <gtest/gtest.h>

#include "generator_cases.h"
#include "stagecraft/schedules/generators.h"
#include "stagecraft/schedules/validate.h"
#include "stagecraft/schedules/weights.h"

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
  EXPECT_FALSE(PolicyInfo(WeightPolicy::kNoStash).stashes_versions);
  EXPECT_EQ(UpdatesPerStep(WeightPolicy::kNoStash, 4), 4);
  // Only PipeMare's backward reads weights its forward did not, so only it can correct for them.
  for (const WeightPolicyInfo& row : kWeightPolicies) EXPECT_EQ(row.correctable, row.policy == WeightPolicy::kNoStash);
  EXPECT_FALSE(TrainsAsSequential(WeightPolicy::kNoStash));
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
  const std::map<const char*, int> want = {{"gpipe", 2}, {"1f1b", 2}, {"2bw", 2}, {"pipedream", 6}, {"pipemare", 6}};
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

// PipeMare keeps one version: every STEP updates in place, and each op reads the newest version
// where it runs. A backward that reads its forward's older version instead (a stash the policy
// does not keep) is a version error.
TEST(WeightPolicy, NoStashReadsTheNewestVersionAndKeepsOne) {
  Schedule s = Generate("pipemare", Params(3, 4, 1));
  EXPECT_TRUE(Validate(s).empty());
  for (size_t r = 0; r < s.ops.size(); ++r) {
    std::map<int, int> made;  // per stage, STEPs so far on the rank
    for (const Op& op : s.ops[r]) {
      if (op.kind == OpKind::kStep) {
        EXPECT_EQ(op.version, ++made[op.stage]);
      } else if (op.kind == OpKind::kF || op.kind == OpKind::kB) {
        EXPECT_EQ(op.version, made[op.stage]) << "rank " << r << " " << ActionString(op, s.microbatches);
      }
    }
  }
  const std::vector<std::vector<bool>> in_place = StepsInPlace(s);
  for (size_t r = 0; r < s.ops.size(); ++r) {
    for (size_t i = 0; i < s.ops[r].size(); ++i) {
      if (s.ops[r][i].kind == OpKind::kStep) {
        EXPECT_TRUE(in_place[r][i]) << "rank " << r << " op " << i;
      }
    }
  }
  // Rank 0's last B reads the version of its F, as a stash would: two versions would then live.
  std::map<std::pair<int, int>, int> f_version;
  for (const Op& op : s.ops[0]) {
    if (op.kind == OpKind::kF) f_version[{op.step, op.microbatch}] = op.version;
  }
  for (auto it = s.ops[0].rbegin(); it != s.ops[0].rend(); ++it) {
    if (it->kind != OpKind::kB) continue;
    ASSERT_NE(it->version, f_version.at({it->step, it->microbatch}));
    it->version = f_version.at({it->step, it->microbatch});
    break;
  }
  bool version_error = false;
  for (const Diagnostic& d : Validate(s)) version_error |= d.code == DiagCode::kVersion;
  EXPECT_TRUE(version_error);
}

}  // namespace
}  // namespace stagecraft::schedules
