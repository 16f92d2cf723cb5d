// Tests for harness/src/predict.cpp's memory terms: a rank's simulated peak split into weights,
// gradients, optimizer state, activations and the rest, worked by hand for explicit costs
// (gradients as large as the weights, no optimizer state, nothing sent).
#include "stagecraft/harness/predict.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <string>

#include "stagecraft/sim/topology.h"

namespace stagecraft::harness {
namespace {

// 2 ranks of 1 GiB each: per rank 100 MiB of weights and 10 MiB of activations per microbatch.
sim::Scenario TwoRanks(int64_t weight_mib, int64_t activation_mib) {
  sim::Scenario s;
  s.name = "terms";
  s.path = "terms.yaml";
  s.topology.device = sim::DeviceSpec::Flat("unit", 1e12, int64_t{1} << 30, 1.0);
  s.topology.devices_per_node = 2;
  s.topology.links = {{sim::LinkScope::kNode, 100e9, 0}};
  s.pipeline.ranks = 2;
  s.pipeline.microbatches = 4;
  sim::ExplicitCosts c;
  c.forward_ns = c.backward_input_ns = c.backward_weight_ns = {1000, 1000};
  c.activation_bytes = {activation_mib << 20, activation_mib << 20};
  c.weight_bytes = {weight_mib << 20, weight_mib << 20};
  s.model.costs = c;
  return s;
}

Prediction PredictOne(const sim::Scenario& s, const std::string& schedule) {
  return Predict(s, sim::Topology(s.topology), ScenarioSchedules(s.pipeline, {schedule}).front());
}

TEST(MemoryTerms, OneFOneBHoldsTwoMicrobatchesOnTheFirstRank) {
  const sim::Scenario s = TwoRanks(100, 10);
  const Prediction p = PredictOne(s, "1f1b");
  const MemoryTerms t = MemoryTermsOf(p, 0);
  EXPECT_EQ(t.weights, int64_t{100} << 20);
  EXPECT_EQ(t.gradients, int64_t{100} << 20);
  EXPECT_EQ(t.optimizer, 0);
  EXPECT_EQ(t.inflight, 2) << "min(p - r, m) on rank 0";
  EXPECT_EQ(t.activations, int64_t{20} << 20);
  EXPECT_EQ(t.other, 0) << "nothing else is held";
  EXPECT_EQ(t.weights + t.gradients + t.activations, p.result.ranks[0].peak_memory_bytes);
  EXPECT_EQ(t.Dominant(), "weights dominate") << "weights and gradients tie; the first listed wins";
}

TEST(MemoryTerms, GpipeHoldsEveryMicrobatch) {
  const Prediction p = PredictOne(TwoRanks(1, 50), "gpipe");
  const MemoryTerms t = MemoryTermsOf(p, 0);
  EXPECT_EQ(t.inflight, 4);
  EXPECT_EQ(t.activations, int64_t{200} << 20);
  EXPECT_EQ(t.Dominant(), "activations dominate");
}

TEST(MemoryTerms, PipeDreamKeepsAVersionPerMicrobatchInFlight) {
  const Prediction p = PredictOne(TwoRanks(100, 1), "pipedream");
  const MemoryTerms t = MemoryTermsOf(p, 0);
  EXPECT_EQ(t.weights, int64_t{200} << 20) << "two versions live at once on rank 0 (p - r)";
  EXPECT_EQ(t.gradients, int64_t{100} << 20);
  EXPECT_EQ(t.Dominant(), "weights dominate");
}

}  // namespace
}  // namespace stagecraft::harness
