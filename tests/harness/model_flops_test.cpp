// model_tflops_per_device (DESIGN.md §10): the model FLOPs per token worked by hand, Megatron-LM's
// closed form for GPT-3 175B (Narayanan et al., SC'21: 72BsLh²(1 + s/6h + V/12hL) per batch
// without recompute, which counts no biases), and simulate's figure from its own step time.
#include <gtest/gtest.h>

#include <cmath>

#include "../sim/sim_test_util.h"
#include "stagecraft/harness/predict.h"
#include "stagecraft/schedules/metrics_json.h"
#include "stagecraft/sim/scenario_checks.h"
#include "stagecraft/sim/topology.h"

namespace stagecraft::harness {
namespace {

// L = 4, h = 8, s = 4, V = 10: blocks 4·(12·64 + 13·8) = 3488, head 80; 6·3568 + 12·4·8·4 = 22944.
TEST(ModelFlops, PerTokenByHand) {
  EXPECT_DOUBLE_EQ(sim::TransformerModelFlopsPerToken(sim::TransformerSpec{4, 8, 2, 4, 10}), 22944);
}

TEST(ModelFlops, MegatronsClosedFormForGpt3) {
  const sim::TransformerSpec t{96, 12288, 96, 2048, 51200};
  const double L = 96, h = 12288, s = 2048, V = 51200;
  const double megatron = 72 * L * h * h * (1 + s / (6 * h) + V / (12 * h * L));
  // The biases and LayerNorms (13h a block) are the only difference: 13 / 12h of the blocks' part.
  EXPECT_NEAR(sim::TransformerModelFlopsPerToken(t) / megatron, 1.0, 1e-4);
  EXPECT_GT(sim::TransformerModelFlopsPerToken(t), megatron);
}

// 8 layers of 512: 6 · 8 · 512² = 12,582,912 FLOPs a sample.
TEST(ModelFlops, AnMlpsPerSampleByHand) {
  sim::MlpSpec m;
  m.layers = 8;
  m.hidden = 512;
  EXPECT_DOUBLE_EQ(sim::MlpModelFlopsPerSample(m), 12'582'912);
}

// A step of 4 microbatches of 2 samples, 2 replicas, at 5 ms: 16 samples × 12,582,912 FLOPs over
// 0.005 s, over 4 devices (2 ranks × 2 replicas), or 2 where the two ranks share a device; none
// for explicit costs or a step of no time.
TEST(ModelFlops, PerDeviceCountsTheDevicesTheJobOccupies) {
  sim::Scenario sc = sim::testing::UnitScenario(2, "1f1b", 2);
  sc.pipeline.data_parallel = 2;
  sc.model.mlp = sim::MlpSpec{8, 512};
  schedules::Schedule s = ScenarioSchedules(sc, {"1f1b"}).front();
  s.data_parallel = 2;
  const double flops = 16 * 12'582'912.0 / 0.005;
  EXPECT_NEAR(ModelTflopsPerDevice(sc, s, 5.0), flops / 4 / 1e12, 1e-15);
  sc.pipeline.ranks_per_device = 2;
  EXPECT_NEAR(ModelTflopsPerDevice(sc, s, 5.0), flops / 2 / 1e12, 1e-15);
  EXPECT_EQ(ModelTflopsPerDevice(sc, s, 0.0), 0.0);
  sc.model.mlp.reset();
  EXPECT_EQ(ModelTflopsPerDevice(sc, s, 5.0), 0.0);
}

TEST(ModelFlops, SimulateReportsItFromItsStepTime) {
  sim::Scenario sc = sim::testing::UnitScenario(2, "1f1b", 2);  // 4 microbatches of 2
  sc.topology.links.push_back(sim::LinkSpec{sim::LinkScope::kNode, 100e9, 2000});
  sc.model.transformer = sim::TransformerSpec{4, 8, 2, 4, 10};
  const Prediction p = Predict(sc, sim::Topology(sc.topology), ScenarioSchedules(sc, {"1f1b"}).front());
  const double tokens = 4 * 2 * 4, devices = 2;
  ASSERT_GT(p.metrics.step_time_ms, 0);
  EXPECT_NEAR(p.metrics.model_tflops_per_device, 22944 * tokens / (p.metrics.step_time_ms * 1e-3) / devices / 1e12,
              1e-12);
  schedules::MetricsFile f;
  f.scenario = "flops";
  f.source = "predicted";
  f.schedules = {p.metrics};
  const std::string text = schedules::MetricsFileToJson(f);
  EXPECT_NE(text.find("\"model_tflops_per_device\":"), std::string::npos);
  EXPECT_NEAR(schedules::MetricsFileFromJson(text, "f.json").schedules[0].model_tflops_per_device,
              p.metrics.model_tflops_per_device, 1e-6);
}

}  // namespace
}  // namespace stagecraft::harness
