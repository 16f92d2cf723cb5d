// Context parallelism end to end: a simulated step counts the data-parallel replicas' samples
// (the C devices of a context group run the same sequences), its model FLOPs by the same count,
// its gradients reduced over the context group even without data parallelism; the plan searches
// C beside P, D and T (the scenario's, and each that leaves a device 4,096 tokens or more).
#include <gtest/gtest.h>

#include <algorithm>
#include <set>
#include <string>
#include <vector>

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

PlanOptions PlanOf(int gpus) {
  PlanOptions o;
  o.gpus = gpus;
  o.global_batch = 16;
  o.top = 1000;
  o.threads = 2;
  o.refine = 0;
  o.schedules = {"1f1b"};
  return o;
}

// Unasked, the plan tries 1, the scenario's C, and each C that leaves a device 4,096 tokens of a
// sequence or more and that the model takes (2C chunks of the sequence, fused attention).
TEST(ContextParallelPredict, ThePlanTriesOneTheScenariosAndEachThatLeavesADeviceFourThousandTokens) {
  const sim::testing::ScratchDir dir;
  const std::string path = dir.Write("cp.yaml", kYaml);
  EXPECT_EQ(DefaultContextParallel(sim::LoadScenarioForNewLayout(path, {}), 8), (std::vector<int>{1, 2}));
  const std::string plain = dir.Write("plain.yaml", sim::testing::Replace(kYaml, ", context_parallel: 2", ""));
  EXPECT_EQ(DefaultContextParallel(sim::LoadScenarioForNewLayout(plain, {}), 8), (std::vector<int>{1}));  // 2048 < 2 x 4096
  // seq 16,384: C = 2 and 4 leave 8,192 and 4,096 tokens; 8 would leave 2,048. On 12 devices 3
  // divides them but not the sequence into 6 chunks.
  const std::string longer = dir.Write("long.yaml", sim::testing::Replace(kYaml, "seq: 2048", "seq: 16384"));
  EXPECT_EQ(DefaultContextParallel(sim::LoadScenarioForNewLayout(longer, {}), 8), (std::vector<int>{1, 2, 4}));
  EXPECT_EQ(DefaultContextParallel(sim::LoadScenarioForNewLayout(longer, {}), 12), (std::vector<int>{1, 2, 4}));
  EXPECT_EQ(DefaultContextParallel(sim::LoadScenarioForNewLayout(longer, {}), 6), (std::vector<int>{1, 2}));
  // Never past pipeline.context_parallel's range (1,024), however long the sequence.
  const std::string longest = dir.Write(
      "longest.yaml", sim::testing::Replace(sim::testing::Replace(kYaml, "seq: 2048", "seq: 8388608"), "peak: 100TFLOPS",
                                            "peak: 1000000TFLOPS"));
  EXPECT_EQ(DefaultContextParallel(sim::LoadScenarioForNewLayout(longest, {}), 2048).back(), 1024);
  // Unfused attention takes none (the scenario's C = 2 is refused when it is loaded).
  const std::string unfused =
      dir.Write("unfused.yaml", sim::testing::Replace(sim::testing::Replace(kYaml, "attention: flash", "attention: unfused"),
                                                      ", context_parallel: 2", ""));
  EXPECT_EQ(DefaultContextParallel(sim::LoadScenarioForNewLayout(unfused, {}), 8), (std::vector<int>{1}));
  const std::string refused = dir.Write("refused.yaml", sim::testing::Replace(kYaml, "attention: flash", "attention: unfused"));
  EXPECT_NE(sim::testing::ErrorOf([&] { sim::LoadScenarioForNewLayout(refused, {}); }).find("pipeline.context_parallel"),
            std::string::npos);
}

TEST(ContextParallelPredict, ThePlanSearchesContextParallelismAndItsBestIsNeverBeaten) {
  const sim::testing::ScratchDir dir;
  const std::string path = dir.Write("cp.yaml", kYaml);
  const PlanOptions o = PlanOf(8);
  const sim::Scenario sc = sim::LoadScenarioForNewLayout(path, {});
  const PlanResult r = Plan(sc, o);
  EXPECT_EQ(r.context_parallel, (std::vector<int>{1, 2}));
  ASSERT_NE(r.best(), nullptr);
  std::set<int> tried;
  for (const PlanEntry& e : r.entries) {
    const PlanConfig& c = e.config;
    tried.insert(c.context_parallel);
    EXPECT_EQ(c.ranks * c.data_parallel * c.tensor_parallel * c.context_parallel, 8) << DescribeConfig(c);
    EXPECT_EQ(sim::LoadScenarioForNewLayout(path, ConfigOverrides(c, o)).pipeline.context_parallel, c.context_parallel);
    // A fused attention kernel keeps no scores: selective recompute is none's run, not tried.
    EXPECT_NE(c.recompute, sim::Recompute::kSelective) << DescribeConfig(c);
    // The TFLOP/s the report prints: the model FLOPs of the step (16 sequences of 2,048 tokens)
    // over its time and the 8 devices.
    const double step_s = e.metrics.step_time_ms * 1e-3;
    const double flops = sim::TransformerModelFlopsPerToken(*sc.model.transformer) * 16 * 2048;
    EXPECT_NEAR(e.metrics.model_tflops_per_device, flops / step_s / 8 / 1e12, 1e-9 * e.metrics.model_tflops_per_device)
        << DescribeConfig(c);
    if (c.context_parallel > 1) {
      EXPECT_NE(DescribeConfig(c).find(" C2"), std::string::npos);
    }
  }
  EXPECT_EQ(tried, (std::set<int>{1, 2}));
  EXPECT_NE(DescribePlan(r, 3).find("layouts P x D x T x C = 8 (C: 1, 2)"), std::string::npos);
  // A scenario that names another module (the dense feed-forward, `mlp`) makes selective its own
  // run: tried, each beside the same layout without recompute, keeping less and taking longer.
  const sim::Scenario modules = sim::LoadScenarioForNewLayout(path, {"pipeline.recompute_modules=[mlp]"});
  const PlanResult with = Plan(modules, o);
  int selective = 0;
  for (const PlanEntry& e : with.entries) {
    if (e.config.recompute != sim::Recompute::kSelective) continue;
    PlanConfig none = e.config;
    none.recompute = sim::Recompute::kNone;
    const auto twin = std::find_if(with.entries.begin(), with.entries.end(), [&](const PlanEntry& other) {
      return DescribeConfig(other.config) == DescribeConfig(none);
    });
    if (twin == with.entries.end()) continue;
    ++selective;
    EXPECT_GT(e.metrics.step_time_ms, twin->metrics.step_time_ms) << DescribeConfig(e.config);
  }
  EXPECT_GT(selective, 0);
  EXPECT_NE(PlanJson(r).find("\"context_parallel\":[1,2]"), std::string::npos);
  // The best against the other C at its P, T and microbatches, simulated directly.
  PlanConfig other = r.best()->config;
  other.context_parallel = 3 - other.context_parallel;
  other.data_parallel = other.data_parallel * r.best()->config.context_parallel / other.context_parallel;
  ASSERT_GE(other.data_parallel, 1);
  ASSERT_EQ(16 % (other.data_parallel * other.microbatch_size), 0) << DescribeConfig(other);
  other.microbatches = 16 / other.data_parallel / other.microbatch_size;
  const Prediction p = PredictFirst(sim::LoadScenarioForNewLayout(path, ConfigOverrides(other, o)));
  ASSERT_FALSE(p.metrics.AnyOom());
  EXPECT_LE(r.best()->metrics.makespan_ns, p.metrics.makespan_ns) << DescribeConfig(other);
  // Asked for one C, the plan tries that one alone.
  PlanOptions two = o;
  two.context_parallel = {2};
  const PlanResult only = Plan(sc, two);
  ASSERT_FALSE(only.entries.empty());
  for (const PlanEntry& e : only.entries) EXPECT_EQ(e.config.context_parallel, 2) << DescribeConfig(e.config);
  // The JSON states C and E of every layout, 1 included: read back as overrides they replace the
  // scenario's (C = 2 here).
  EXPECT_NE(PlanJson(r).find("\"context_parallel\":1,\"expert_parallel\":1"), std::string::npos);
}

TEST(ContextParallelPredict, ThePlanRefusesAContextParallelismTheJobOrModelCannotTake) {
  const sim::testing::ScratchDir dir;
  const std::string path = dir.Write("cp.yaml", kYaml);
  const sim::Scenario sc = sim::LoadScenarioForNewLayout(path, {});
  PlanOptions o = PlanOf(8);
  o.context_parallel = {3};
  EXPECT_NE(sim::testing::ErrorOf([&] { Plan(sc, o); }).find("--context-parallel 3: each C must divide the 8 devices"),
            std::string::npos);
  o.gpus = 6, o.global_batch = 6;  // 3 divides them, but 2048 tokens are not 6 equal chunks
  EXPECT_NE(sim::testing::ErrorOf([&] { Plan(sc, o); }).find("model.transformer.seq 2048 is not a multiple of 6"),
            std::string::npos);
  o = PlanOf(8);
  o.context_parallel = {0};
  EXPECT_NE(sim::testing::ErrorOf([&] { Plan(sc, o); }).find("--context-parallel: expected sizes from 1"),
            std::string::npos);
  // Unasked on 7 devices, C = 2 divides none of them: the plan tries C = 1 alone.
  PlanOptions on_seven = PlanOf(7);
  on_seven.global_batch = 14;
  const PlanResult seven = Plan(sc, on_seven);
  EXPECT_EQ(seven.context_parallel, (std::vector<int>{1}));
  EXPECT_NE(std::find(seven.notes.begin(), seven.notes.end(),
                      "pipeline.context_parallel 2 of the scenario does not divide the 7 devices: not tried"),
            seven.notes.end());
  // A T no layout takes names every T of every layout the C tried leave, the C ascending and each
  // once, whatever the order asked.
  o = PlanOf(8);
  o.context_parallel = {4, 1, 4};
  o.tensor_parallel = {16};
  EXPECT_NE(sim::testing::ErrorOf([&] { Plan(sc, o); })
                .find("(P x D x T = 8 or 2 with C = 1 or 4: T is one of 1, 2, 4, 8)"),
            std::string::npos);
}

}  // namespace
}  // namespace stagecraft::harness
