// Tests for sim/src/cost_models.cpp: the table's rows and their precedence, every shipped
// scenario's costs, the schedule's shape and update regime reaching the model, and a profile
// read once with the scenario (no file is read when costs are built).
#include "stagecraft/sim/cost_models.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <string>
#include <vector>

#include "sim_test_util.h"

namespace stagecraft::sim {
namespace {

using testing::ErrorOf;
using testing::ScratchDir;

const char kProfile[] = R"(microbatch_size: 8
send_bytes: 512
layers:
  - {forward: 1ms, backward_input: 2ms, backward_weight: 3ms, activation_bytes: 1KiB, weight_bytes: 10KiB}
  - {forward: 10us, backward_input: 20us, backward_weight: 30us, activation_bytes: 100, weight_bytes: 1000}
  - {forward: 5ns, backward_input: 6ns, backward_weight: 7ns, activation_bytes: 1, weight_bytes: 2}
)";

TEST(CostModels, TheTableInOrderOfPrecedence) {
  std::vector<std::string> rows;
  for (const CostModel& model : CostModels()) {
    rows.push_back(fmt::format("{} {}", model.name, model.key));
    EXPECT_NE(model.applies, nullptr);
    EXPECT_NE(model.build, nullptr);
  }
  EXPECT_EQ(rows, (std::vector<std::string>{"profile model.profile", "explicit model.costs",
                                            "roofline model.transformer", "transformer model.transformer",
                                            "mlp model.mlp"}));
}

TEST(CostModels, PrecedenceProfileThenCostsThenModel) {
  ScratchDir dir;
  Scenario s = testing::UnitScenario(2, "gpipe", 8);
  s.model.mlp = MlpSpec{3, 16};
  EXPECT_EQ(CostModelFor(s).name, "mlp");
  EXPECT_EQ(BuildCosts(s, 2).source, "mlp");
  ExplicitCosts c;
  c.forward_ns = c.backward_input_ns = c.backward_weight_ns = c.activation_bytes = c.weight_bytes = {1, 1};
  s.model.costs = c;
  EXPECT_EQ(CostModelFor(s).name, "explicit");
  EXPECT_EQ(BuildCosts(s, 2).source, "explicit");
  testing::ReadProfileInto(&s, dir.Write("profile.yaml", kProfile));
  EXPECT_EQ(CostModelFor(s).name, "profile");
  EXPECT_EQ(BuildCosts(s, 2).source, "profile:" + s.model.profile_path);
  s.model = ModelSpec{};
  EXPECT_EQ(ErrorOf([&] { CostModelFor(s); }),
            "test.yaml: model has none of model.profile, model.costs, model.transformer, model.mlp");
}

// LoadScenario reads model.profile once: with the file gone, the costs of every schedule are
// still built, each in its schedule's shape.
TEST(CostModels, AProfileIsReadOnceWithTheScenario) {
  ScratchDir dir;
  const std::string profile = dir.Write("profile.yaml", kProfile);
  const std::string path = dir.Write("s.yaml", R"(name: once
topology: {device: {name: d, peak: 1TFLOPS, memory: 1GiB}, devices_per_node: 2,
           links: [{scope: node, bandwidth: 1GB/s, latency: 1us}]}
model: {profile: profile.yaml}
pipeline: {schedule: [1f1b, zb-v], ranks: 1, microbatches: 2, microbatch_size: 8}
)");
  const Scenario s = LoadScenario(path, {});
  ASSERT_NE(s.model.profile, nullptr);
  std::filesystem::remove(profile);
  const Scenario copy = s;  // copies share the one profile
  EXPECT_EQ(copy.model.profile.get(), s.model.profile.get());
  for (const std::string name : {"1f1b", "zb-v"}) {
    const schedules::GeneratorInfo& info = *schedules::FindGenerator(name);
    const schedules::Schedule schedule = schedules::Generate(name, GeneratorParamsFor(s.pipeline, info));
    const CostTable t = BuildCosts(copy, schedule);
    ASSERT_EQ(t.stages.size(), static_cast<size_t>(schedule.stages())) << name;
    int64_t forward_ns = 0;
    for (const StageCost& c : t.stages) forward_ns += c.forward_ns;
    EXPECT_EQ(forward_ns, 1'010'005) << name;  // every layer once, whatever the split
  }
}

TEST(CostModels, EveryShippedScenarioHasCosts) {
  for (const std::string& path : testing::ShippedScenarios()) {
    SCOPED_TRACE(path);
    const Scenario s = LoadScenario(path, {});
    const int stages = s.pipeline.ranks * std::max(s.pipeline.chunks, 1);
    const CostTable t = BuildCosts(s, stages);
    ASSERT_EQ(static_cast<int>(t.stages.size()), stages);
    for (const StageCost& c : t.stages) EXPECT_GT(c.forward_ns, 0);
  }
}

}  // namespace
}  // namespace stagecraft::sim
