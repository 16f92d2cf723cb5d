// The plan over a mixture-of-experts model (issue 56 point 7): it tries every expert-parallel
// degree E that divides the experts and D x T beside P, D and T, states E in the configurations
// it reports, and its best is never slower than any E at the best's layout simulated directly.
// On a cluster of two device kinds (point 5) it tries the stages across the groups and a
// pipeline per group, and its best is never slower than the other placement simulated directly.
#include <algorithm>
#include <set>
#include <string>

#include <gtest/gtest.h>

#include "../sim/sim_test_util.h"
#include "stagecraft/harness/plan.h"
#include "stagecraft/harness/predict.h"
#include "stagecraft/sim/scenario_checks.h"
#include "stagecraft/sim/topology.h"

namespace stagecraft::harness {
namespace {

// 8 layers of 512 with 8 experts of 1024 (top-2) on 2 nodes of 4 devices of 16 GiB.
constexpr const char* kMoe = R"(name: moe-plan
topology: {device: {name: d, peak: 100TFLOPS, memory: 16GiB}, nodes: 2, devices_per_node: 4,
           links: [{scope: node, bandwidth: 100GB/s, latency: 2us}, {scope: cluster, bandwidth: 10GB/s, latency: 5us}]}
model:
  transformer: {layers: 8, hidden: 512, heads: 8, seq: 512, vocab: 1000, dtype: bf16,
                moe: {experts: 8, top_k: 2, expert_hidden: 1024}}
pipeline: {schedule: 1f1b, ranks: 1, microbatches: 1}
)";

// 8 GPUs, 1F1B only, every configuration kept.
PlanOptions Options(int global_batch) {
  PlanOptions o;
  o.gpus = 8;
  o.global_batch = global_batch;
  o.top = 1000;
  o.threads = 2;
  o.refine = 0;
  o.schedules = {"1f1b"};
  return o;
}

// `c` simulated as `simulate` would from the scenario at `path` with the plan's overrides.
Prediction Direct(const std::string& path, const PlanConfig& c, const PlanOptions& o) {
  const sim::Scenario sc = sim::LoadScenarioForNewLayout(path, ConfigOverrides(c, o));
  const sim::Topology topo(sc.topology);
  return Predict(sc, topo, ScenarioSchedules(sc, sc.pipeline.schedules).front());
}

TEST(PlanMoe, TriesEveryExpertParallelDegreeAndItsBestIsNeverBeaten) {
  const sim::testing::ScratchDir dir;
  const std::string path = dir.Write("moe.yaml", kMoe);
  const PlanOptions o = Options(8);
  const PlanResult r = Plan(sim::LoadScenarioForNewLayout(path, {}), o);
  ASSERT_NE(r.best(), nullptr);
  std::set<int> degrees;
  for (const PlanEntry& e : r.entries) {
    const PlanConfig& c = e.config;
    degrees.insert(c.expert_parallel);
    EXPECT_EQ(8 % c.expert_parallel, 0) << DescribeConfig(c);
    EXPECT_EQ(c.data_parallel * c.tensor_parallel % c.expert_parallel, 0) << DescribeConfig(c);
    if (c.expert_parallel > 1) EXPECT_NE(DescribeConfig(c).find(" E" + std::to_string(c.expert_parallel)), std::string::npos);
  }
  EXPECT_EQ(degrees, (std::set<int>{1, 2, 4, 8}));
  // The overrides state E even when it is 1: a scenario that states another is replaced (what
  // --write-best writes is what the plan simulated).
  const std::string stated = dir.Write("stated.yaml", std::string(kMoe).replace(std::string(kMoe).find("ranks: 1,"), 9,
                                                                             "ranks: 1, data_parallel: 8, expert_parallel: 8,"));
  PlanConfig one = r.best()->config;
  one.expert_parallel = 1;
  EXPECT_EQ(sim::LoadScenario(stated, ConfigOverrides(one, o)).pipeline.expert_parallel, 1);
  // Every E at the best's layout, simulated directly from the scenario with the plan's overrides.
  const PlanConfig best = r.best()->config;
  int checked = 0;
  for (const int e : {1, 2, 4, 8}) {
    if (best.data_parallel * best.tensor_parallel % e != 0) continue;
    PlanConfig c = best;
    c.expert_parallel = e;
    EXPECT_EQ(sim::LoadScenarioForNewLayout(path, ConfigOverrides(c, o)).pipeline.expert_parallel, e);
    const Prediction direct = Direct(path, c, o);
    if (direct.metrics.AnyOom()) continue;
    ++checked;
    EXPECT_LE(r.best()->metrics.makespan_ns, direct.metrics.makespan_ns) << DescribeConfig(c);
  }
  EXPECT_GE(checked, 1);
}

// A stated load imbalance (3 x a device's even share) plans the layouts that can have it: E = 4
// and 8 (at most 4 x: each of the E devices sends it min(2, 8 / E) of each token's 2 copies),
// not E = 1 (no expert parallelism) nor 2 (at most 2 x).
TEST(PlanMoe, AStatedLoadImbalancePlansTheExpertLayoutsThatCanHaveIt) {
  const sim::testing::ScratchDir dir;
  std::string text = kMoe;
  text.replace(text.find("expert_hidden: 1024}"), 20, "expert_hidden: 1024, load_imbalance: 3}");
  const std::string path = dir.Write("imbalanced.yaml", text);
  const PlanResult r = Plan(sim::LoadScenarioForNewLayout(path, {}), Options(8));
  ASSERT_NE(r.best(), nullptr);
  std::set<int> degrees;
  for (const PlanEntry& e : r.entries) degrees.insert(e.config.expert_parallel);
  EXPECT_EQ(degrees, (std::set<int>{4, 8}));
}

// Megatron-LM's combined 1F1B (interleaved-overlap) is part of the plan's default set for a MoE
// model, tried where there are all-to-alls to overlap (E > 1); named, it is tried at every E.
TEST(PlanMoe, TriesMegatronsCombinedOneFOneBWhereThereAreAllToAlls) {
  const sim::testing::ScratchDir dir;
  const std::string path = dir.Write("moe.yaml", kMoe);
  PlanOptions o = Options(16);
  o.schedules = {};
  const PlanResult r = Plan(sim::LoadScenarioForNewLayout(path, {}), o);
  std::set<int> degrees;
  bool interleaved = false;
  for (const PlanEntry& e : r.entries) {
    interleaved |= e.config.schedule == "interleaved";
    if (e.config.schedule == "interleaved-overlap") degrees.insert(e.config.expert_parallel);
  }
  EXPECT_TRUE(interleaved);
  ASSERT_FALSE(degrees.empty());
  EXPECT_FALSE(degrees.contains(1));
  o.schedules = {"interleaved-overlap"};
  degrees.clear();
  for (const PlanEntry& e : Plan(sim::LoadScenarioForNewLayout(path, {}), o).entries) {
    EXPECT_EQ(e.config.schedule, "interleaved-overlap");
    degrees.insert(e.config.expert_parallel);
  }
  EXPECT_TRUE(degrees.contains(1));
}

// One node of 4 fast devices and one of 4 at a quarter of their rate; a dense model.
constexpr const char* kMixed = R"(name: mixed-plan
topology:
  groups:
    - {nodes: 1, devices_per_node: 4, device: {name: fast, peak: 200TFLOPS, memory: 16GiB}}
    - {nodes: 1, devices_per_node: 4, device: {name: slow, peak: 50TFLOPS, memory: 16GiB}}
  links: [{scope: node, bandwidth: 100GB/s, latency: 2us}, {scope: cluster, bandwidth: 10GB/s, latency: 5us}]
model:
  transformer: {layers: 8, hidden: 512, heads: 8, seq: 512, vocab: 1000, dtype: bf16}
pipeline: {schedule: 1f1b, ranks: 1, microbatches: 1}
)";

TEST(PlanMoe, TriesBothPlacementsOnAMixedClusterAndItsBestIsNeverBeaten) {
  const sim::testing::ScratchDir dir;
  const std::string path = dir.Write("mixed.yaml", kMixed);
  const PlanOptions o = Options(16);
  const PlanResult r = Plan(sim::LoadScenarioForNewLayout(path, {}), o);
  ASSERT_NE(r.best(), nullptr);
  std::set<sim::Axis> outermost;
  for (const PlanEntry& e : r.entries) {
    const PlanConfig& c = e.config;
    if (c.ranks > 1 && c.data_parallel > 1) {
      ASSERT_EQ(c.placement.size(), 3u) << DescribeConfig(c);
      outermost.insert(c.placement.back());
    } else {
      EXPECT_TRUE(c.placement.empty()) << DescribeConfig(c);
    }
  }
  EXPECT_EQ(outermost, (std::set<sim::Axis>{sim::Axis::kData, sim::Axis::kPipeline}));
  for (const PlanEntry& e : r.entries) {
    PlanConfig c = e.config;
    if (c.placement.empty()) continue;
    std::swap(c.placement[1], c.placement[2]);  // the other order, at the same layout
    const Prediction direct = Direct(path, c, o);
    if (direct.metrics.AnyOom()) continue;
    EXPECT_LE(r.best()->metrics.makespan_ns, direct.metrics.makespan_ns) << DescribeConfig(c);
  }
}

}  // namespace
}  // namespace stagecraft::harness
