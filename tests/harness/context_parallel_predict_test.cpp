// Context parallelism end to end: a simulated step counts the data-parallel replicas' samples
// (the C devices of a context group run the same sequences), its model FLOPs by the same count,
// its gradients reduced over the context group even without data parallelism; the plan keeps
// the scenario's C and lays P x D x T over the devices it leaves.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>

#include "../sim/sim_test_util.h"
#include "stagecraft/harness/plan.h"
#include "stagecraft/harness/predict.h"
#include "stagecraft/scenario/transformer_spec.h"
#include "stagecraft/schedules/op_kinds.h"
#include "stagecraft/sim/scenario_checks.h"
#include "stagecraft/sim/topology.h"

namespace stagecraft::harness {
namespace {

// 4 layers of 1024 at seq 2048 on one node of 8 devices of 100 TFLOP/s, 1F1B over 2 ranks.
constexpr const char* kYaml = R"(name: cp
topology: {device: {name: d, peak: 100TFLOPS, memory: 80GiB, efficiency: 0.5}, nodes: 1, devices_per_node: 8,
           links: [{scope: node, bandwidth: 100GB/s, latency: 2us}]}
model:
  transformer: {layers: 4, hidden: 1024, heads: 16, seq: 2048, vocab: 32000, attention: flash, dtype: bf16}
pipeline: {schedule: 1f1b, ranks: 2, microbatches: 4, microbatch_size: 2, context_parallel: 2}
training: {optimizer: adam, lr: 0.0001, dtype: bf16}
)";

Prediction PredictFirst(const sim::Scenario& sc) {
  const sim::Topology topo(sc.topology);
  return Predict(sc, topo, ScenarioSchedules(sc, sc.pipeline.schedules).front());
}

TEST(ContextParallelPredict, CountsTheReplicasSamplesAndReducesOverTheContextGroup) {
  const sim::testing::ScratchDir dir;
  const std::string path = dir.Write("cp.yaml", kYaml);
  for (const int d : {1, 2}) {
    SCOPED_TRACE(d);
    const sim::Scenario sc = sim::LoadScenario(path, {"pipeline.data_parallel=" + std::to_string(d)});
    const Prediction p = PredictFirst(sc);
    const auto reduces = std::count_if(p.schedule.ops[0].begin(), p.schedule.ops[0].end(), [](const auto& op) {
      return op.kind == schedules::OpKind::kReduceGrad;
    });
    EXPECT_EQ(reduces, 1);  // the D x C = 2d devices of rank 0's stage reduce its gradients
    EXPECT_EQ(p.schedule.data_parallel, 2 * d);
    // d replicas x 4 microbatches x 2 sequences a step.
    const double step_s = p.metrics.step_time_ms * 1e-3;
    EXPECT_NEAR(p.metrics.throughput_samples_per_s, d * 4 * 2 / step_s, 1e-9 * d * 8 / step_s);
    const double flops = sim::TransformerModelFlopsPerToken(*sc.model.transformer) * d * 4 * 2 * 2048;
    EXPECT_NEAR(p.metrics.model_tflops_per_device, flops / step_s / (2 * 2 * d) / 1e12, 1e-6);
  }
}

TEST(ContextParallelPredict, ThePlanKeepsTheScenariosContextParallelism) {
  const sim::testing::ScratchDir dir;
  const std::string path = dir.Write("cp.yaml", kYaml);
  PlanOptions o;
  o.gpus = 8;
  o.global_batch = 16;
  o.top = 1000;
  o.threads = 2;
  o.refine = 0;
  o.schedules = {"1f1b"};
  const PlanResult r = Plan(sim::LoadScenarioForNewLayout(path, {}), o);
  EXPECT_EQ(r.context_parallel, 2);
  ASSERT_FALSE(r.entries.empty());
  for (const PlanEntry& e : r.entries) {
    const PlanConfig& c = e.config;
    EXPECT_EQ(c.ranks * c.data_parallel * c.tensor_parallel * 2, 8) << DescribeConfig(c);
    const sim::Scenario direct = sim::LoadScenarioForNewLayout(path, ConfigOverrides(c, o));
    EXPECT_EQ(direct.pipeline.context_parallel, 2);
  }
  EXPECT_NE(DescribePlan(r, 3).find("layouts P x D x T = 4 (x the scenario's 2-way context parallelism)"),
            std::string::npos);
  // The plan checks the C it keeps against the model: unfused attention cannot take it.
  const std::string unfused = dir.Write("unfused.yaml", sim::testing::Replace(kYaml, "attention: flash", "attention: unfused"));
  EXPECT_NE(sim::testing::ErrorOf([&] { sim::LoadScenarioForNewLayout(unfused, {}); }).find("pipeline.context_parallel"),
            std::string::npos);
  o.gpus = 7;
  EXPECT_NE(sim::testing::ErrorOf([&] { Plan(sim::LoadScenarioForNewLayout(path, {}), o); })
                .find("pipeline.context_parallel 2"),
            std::string::npos);
}

}  // namespace
}  // namespace stagecraft::harness
