// Tests for sim/src/profile_costs.cpp, its layer sums (the calibration's scales are in
// profile_calibration_test.cpp): a stage costs the sums of its layers' measured times and
// sizes, worked by hand, with recompute and with each layer's optimizer step.
#include "stagecraft/sim/profile_costs.h"

#include <gtest/gtest.h>

#include <string>

#include "sim_test_util.h"

namespace stagecraft::sim {
namespace {

using testing::ScratchDir;

const char kProfile[] = R"(device: cpu-core
microbatch_size: 8
send_bytes: 512
layers:
  - {forward: 1ms, backward_input: 2ms, backward_weight: 3ms, activation_bytes: 1KiB, weight_bytes: 10KiB}
  - {forward: 10us, backward_input: 20us, backward_weight: 30us, activation_bytes: 100, weight_bytes: 1000,
     w_stash_bytes: 7, grad_bytes: 500, optimizer_bytes: 2000}
  - {forward: 5ns, backward_input: 6ns, backward_weight: 7ns, activation_bytes: 1, weight_bytes: 2}
)";

// The optional per-layer `step` (optimizer update time) sums per stage like the other times.
const char kStepProfile[] = R"(microbatch_size: 8
layers:
  - {forward: 1ms, backward_input: 1ms, backward_weight: 1ms, step: 2ms, activation_bytes: 1, weight_bytes: 1}
  - {forward: 1ms, backward_input: 1ms, backward_weight: 1ms, step: 2ms, activation_bytes: 1, weight_bytes: 1}
  - {forward: 1ms, backward_input: 1ms, backward_weight: 1ms, step: 2ms, activation_bytes: 1, weight_bytes: 1}
  - {forward: 1ms, backward_input: 1ms, backward_weight: 1ms, step: 2ms, activation_bytes: 1, weight_bytes: 1}
)";

Scenario WithProfile(const ScratchDir& dir, const char* text) {
  Scenario s = testing::UnitScenario(2, "gpipe", 8);
  testing::ReadProfileInto(&s, dir.Write("profile.yaml", text));
  return s;
}

TEST(ProfileCosts, SumsLayersPerStage) {
  ScratchDir dir;
  Scenario s = WithProfile(dir, kProfile);
  CostTable t = BuildCosts(s, 2);
  EXPECT_EQ(t.source, "profile:" + s.model.profile_path);
  ASSERT_EQ(t.stages.size(), 2u);  // layers 0-1 on stage 0, layer 2 on stage 1
  EXPECT_EQ(t.stages[0].forward_ns, 1'010'000);
  EXPECT_EQ(t.stages[0].backward_input_ns, 2'020'000);
  EXPECT_EQ(t.stages[0].backward_weight_ns, 3'030'000);
  EXPECT_EQ(t.stages[0].activation_bytes, 1124);
  EXPECT_EQ(t.stages[0].weight_bytes, 11240);
  EXPECT_EQ(t.stages[0].grad_bytes, 10240 + 500);
  EXPECT_EQ(t.stages[0].optimizer_bytes, 2000);
  EXPECT_EQ(t.stages[0].w_stash_bytes, 7);
  EXPECT_EQ(t.stages[0].send_bytes, 512);
  EXPECT_EQ(t.stages[1].forward_ns, 5);
  EXPECT_EQ(t.stages[1].grad_bytes, 2);

  s.pipeline.recompute = Recompute::kFull;
  t = BuildCosts(s, 2);
  EXPECT_EQ(t.stages[0].backward_input_ns, 2'020'000 + 1'010'000);
  // The stage's input alone is kept from F to its backward, which rebuilds both layers'.
  EXPECT_EQ(t.stages[0].activation_bytes, 512);
  EXPECT_EQ(t.stages[0].recompute_bytes, 1124);
  EXPECT_EQ(t.stages[1].activation_bytes, 512 + 512);  // and the loss gradient on the last
  EXPECT_EQ(t.stages[1].recompute_bytes, 1);
}

TEST(ProfileCosts, StepSumsPerStage) {
  ScratchDir dir;
  const Scenario s = WithProfile(dir, kStepProfile);
  CostTable t = BuildCosts(s, 2);  // two layers per stage
  ASSERT_EQ(t.stages.size(), 2u);
  for (const StageCost& c : t.stages) {
    EXPECT_EQ(c.step_ns, 4'000'000);
    EXPECT_EQ(c.forward_ns, 2'000'000);
  }
  t = BuildCosts(s, 4);  // one layer per stage (two chunks per rank)
  ASSERT_EQ(t.stages.size(), 4u);
  for (const StageCost& c : t.stages) EXPECT_EQ(c.step_ns, 2'000'000);
}

TEST(ProfileCosts, WithoutStepCostsNoStepTime) {
  ScratchDir dir;
  const Scenario s = WithProfile(dir, kProfile);
  for (const StageCost& c : BuildCosts(s, 2).stages) EXPECT_EQ(c.step_ns, 0);
  for (const LayerProfile& l : s.model.profile->layers) EXPECT_EQ(l.step_ns, 0);
}

// CostsFromProfile takes a profile held in memory, not the scenario's: what `stagecraft profile`
// calibrates against while it measures.
TEST(ProfileCosts, AProfileHeldInMemory) {
  ScratchDir dir;
  const Scenario s = WithProfile(dir, kProfile);
  Profile p = *s.model.profile;
  p.layers[2].forward_ns = 1000;
  const CostTable t = CostsFromProfile(s, p, schedules::Shape{2, 1, schedules::Placement::kLoop}, false, false);
  EXPECT_EQ(t.stages[1].forward_ns, 1000);
  EXPECT_EQ(BuildCosts(s, 2).stages[1].forward_ns, 5);  // the scenario's own is unchanged
}

}  // namespace
}  // namespace stagecraft::sim
