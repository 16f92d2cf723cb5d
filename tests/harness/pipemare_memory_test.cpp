// The simulator's memory for PipeMare (DESIGN.md §10, weight_policy.h): no stash, so one weight
// version per stage where PipeDream keeps p − s (Harlap et al., SOSP'19 §3.3), and with the
// discrepancy correction one more weight-sized buffer per stage (Yang et al., MLSys'21 §3.2). The
// activations are PipeDream's: the same 1F1B order.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "../sim/sim_test_util.h"
#include "stagecraft/harness/predict.h"
#include "stagecraft/sim/scenario_checks.h"
#include "stagecraft/sim/topology.h"

namespace stagecraft::harness {
namespace {

constexpr int64_t kWeight = 10 << 20;

sim::Scenario Base() {
  sim::Scenario sc = sim::testing::UnitScenario(4, "pipedream");
  sc.topology.links.push_back(sim::LinkSpec{sim::LinkScope::kNode, 100e9, 2000});
  sc.model.costs = sim::ExplicitCosts{};
  sc.model.costs->forward_ns.assign(4, 1'000'000);
  sc.model.costs->backward_input_ns.assign(4, 2'000'000);
  sc.model.costs->backward_weight_ns.assign(4, 1'000'000);
  sc.model.costs->activation_bytes.assign(4, 1 << 20);
  sc.model.costs->weight_bytes.assign(4, kWeight);
  sc.pipeline.microbatches = 8;
  sc.pipeline.steps = 2;
  sc.has_training = true;
  sc.training.lr = 0.1;
  return sc;
}

schedules::RunRecord Simulated(const sim::Scenario& sc, const std::string& schedule) {
  return Predict(sc, sim::Topology(sc.topology), ScenarioSchedules(sc, {schedule}).front()).result;
}

TEST(PipeMareMemory, OneVersionAndTheVelocityBuffer) {
  sim::Scenario sc = Base();
  const schedules::RunRecord stash = Simulated(sc, "pipedream");
  const schedules::RunRecord plain = Simulated(sc, "pipemare");
  sc.training.pipemare = sim::PipeMareSpec{};
  sc.training.pipemare->correction = true;
  const schedules::RunRecord corrected = Simulated(sc, "pipemare");
  for (int r = 0; r < 4; ++r) {
    SCOPED_TRACE(r);
    EXPECT_EQ(stash.ranks[r].peak_weight_versions, 4 - r);
    EXPECT_EQ(plain.ranks[r].peak_weight_versions, 1);
    EXPECT_EQ(stash.ranks[r].peak_memory_bytes - plain.ranks[r].peak_memory_bytes, (3 - r) * kWeight);
    EXPECT_EQ(corrected.ranks[r].peak_memory_bytes - plain.ranks[r].peak_memory_bytes, kWeight);
  }
  // The order is PipeDream's: the same makespan.
  EXPECT_EQ(plain.makespan_ns(), stash.makespan_ns());
}

}  // namespace
}  // namespace stagecraft::harness
