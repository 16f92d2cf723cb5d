// ZeRO-2 and ZeRO-3 (pipeline.zero: 2 | 3): a stage's memory and op times against ZeRO-1's,
// worked by hand from the ring's textbook time (an all-gather or a reduce-scatter of B bytes over
// n devices moves (n - 1)/n of B through each link) and the overlap rule the docs state (an op
// takes the longer of its compute and its collectives, plus one layer's share of them); the
// REDUCE_GRAD that has nothing left; bad values one line at their key.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <utility>
#include <vector>

#include "sim_test_util.h"
#include "stagecraft/sim/collective_streams.h"
#include "stagecraft/sim/cost_models.h"

namespace stagecraft::sim {
namespace {

using testing::ErrorOf;

// Two replicas of a two-rank pipeline on one node of four devices, 100 GB/s (100 bytes a ns)
// and no latency between them, the analytical model at 50 TFLOP/s; 16-bit gradients (bf16's
// --grad-reduce-in-bf16), so a pass moves the weights' bytes, gradients or weights.
std::string Yaml(int layers, int seq,
                 const std::string& device =
                     "{name: gpu, peak: 100TFLOPS, memory: 80GiB, "
                     "efficiency: 0.5}") {
  return "name: z\n"
         "topology:\n"
         "  device: " +
         device +
         "\n"
         "  nodes: 1\n"
         "  devices_per_node: 4\n"
         "  links: [{scope: node, bandwidth: 100GB/s, latency: 0us}]\n"
         "model:\n"
         "  transformer: {layers: " +
         std::to_string(layers) + ", hidden: 1024, heads: 16, seq: " + std::to_string(seq) +
         ", vocab: 32000}\n"
         "pipeline: {schedule: 1f1b, ranks: 2, microbatches: 4, data_parallel: 2, zero: 1}\n"
         "training: {optimizer: adam, lr: 0.0001, dtype: bf16, grad_dtype: bf16}\n";
}

// One pass of a ring over 2 devices: half the buffer through each link, at 100 bytes a ns.
double OnePassNs(double bytes) { return 0.5 * bytes / 100.0; }

int64_t Beside(int64_t compute_ns, double comm_ns, int layers) {
  return static_cast<int64_t>(std::llround(std::max(static_cast<double>(compute_ns), comm_ns) + comm_ns / layers));
}

void ExpectShardedAsStated(const std::string& yaml, int layers_per_stage) {
  const Scenario one = LoadScenarioFromText(yaml, "z.yaml", {});
  const Scenario two = LoadScenarioFromText(yaml, "z.yaml", {"pipeline.zero=2"});
  const Scenario three = LoadScenarioFromText(yaml, "z.yaml", {"pipeline.zero=3"});
  const CostTable a = BuildCosts(one, 2), b = BuildCosts(two, 2), c = BuildCosts(three, 2);
  for (int st = 0; st < 2; ++st) {
    SCOPED_TRACE(st);
    const StageCost &z1 = a.stages[st], &z2 = b.stages[st], &z3 = c.stages[st];
    const double pass = OnePassNs(static_cast<double>(z1.weight_bytes));  // 16-bit weights, as the gradients
    // ZeRO-2: the gradients halved, the REDUCE_GRAD the all-gather alone (half an all-reduce),
    // every backward's W beside its reduce-scatter, and a whole B beside it.
    EXPECT_EQ(z2.weight_bytes, z1.weight_bytes);
    EXPECT_EQ(z2.grad_bytes, z1.grad_bytes / 2);
    EXPECT_EQ(z2.optimizer_bytes, z1.optimizer_bytes);
    EXPECT_EQ(z2.ReduceBytes(), z1.ReduceBytes() / 2);
    EXPECT_EQ(z2.forward_ns, z1.forward_ns);
    EXPECT_EQ(z2.backward_input_ns, z1.backward_input_ns);
    EXPECT_EQ(z2.backward_weight_ns, Beside(z1.backward_weight_ns, pass, layers_per_stage));
    EXPECT_EQ(z2.FullBackwardNs(), Beside(z1.FullBackwardNs(), pass, layers_per_stage));
    // ZeRO-3: the weights halved too, two layers' whole weights held while an op runs, nothing
    // left for the REDUCE_GRAD; F and I beside the gather, W beside the scatter, B beside both.
    EXPECT_EQ(z3.weight_bytes, z1.weight_bytes / 2);
    EXPECT_EQ(z3.grad_bytes, z1.grad_bytes / 2);
    EXPECT_EQ(z3.workspace_bytes, z1.workspace_bytes + 2 * z1.weight_bytes / layers_per_stage);
    EXPECT_EQ(z3.ReduceBytes(), 0);
    EXPECT_EQ(z3.forward_ns, Beside(z1.forward_ns, pass, layers_per_stage));
    EXPECT_EQ(z3.backward_input_ns, Beside(z1.backward_input_ns, pass, layers_per_stage));
    EXPECT_EQ(z3.backward_weight_ns, Beside(z1.backward_weight_ns, pass, layers_per_stage));
    EXPECT_EQ(z3.FullBackwardNs(), Beside(z1.FullBackwardNs(), 2 * pass, layers_per_stage));
  }
}

// Long sequences: each op's compute outlasts its collectives (only a layer's share shows).
TEST(ShardedZero, ComputeBoundStagesPayOneLayersShare) {
  const std::string yaml = Yaml(4, 4096);
  const CostTable a = BuildCosts(LoadScenarioFromText(yaml, "z.yaml", {}), 2);
  ASSERT_GT(static_cast<double>(a.stages[0].forward_ns), OnePassNs(static_cast<double>(a.stages[0].weight_bytes)));
  ExpectShardedAsStated(yaml, 2);
}

// The roofline row (the device library's H100) folds them in alike.
TEST(ShardedZero, RooflineStagesAlike) {
  const std::string yaml = Yaml(4, 4096, "H100-SXM");
  ASSERT_EQ(BuildCosts(LoadScenarioFromText(yaml, "z.yaml", {}), 2).source, "roofline");
  ExpectShardedAsStated(yaml, 2);
  ExpectShardedAsStated(Yaml(4, 16, "H100-SXM"), 2);
}

// Short ones: the collectives outlast the compute, which then waits for them.
TEST(ShardedZero, CommunicationBoundStagesWaitForTheirCollectives) {
  const std::string yaml = Yaml(4, 16);
  const CostTable a = BuildCosts(LoadScenarioFromText(yaml, "z.yaml", {}), 2);
  ASSERT_LT(static_cast<double>(a.stages[0].forward_ns), OnePassNs(static_cast<double>(a.stages[0].weight_bytes)));
  ExpectShardedAsStated(yaml, 2);
}

// The REDUCE_GRAD before each STEP: ZeRO-1's reduce-scatter and all-gather (an all-reduce's
// ring), ZeRO-2's all-gather alone (half of it, no latency here), ZeRO-3's nothing (no phase).
TEST(ShardedZero, ReduceGradCarriesWhatIsLeft) {
  const std::string yaml = Yaml(4, 1024);
  schedules::GeneratorParams params = schedules::test_cases::Params(2, 4, 1, 1);
  params.data_parallel = 2;
  const schedules::Schedule s = schedules::Lower(schedules::Generate("1f1b", params));
  const auto alone = [&](const std::string& zero) {
    const Scenario sc = LoadScenarioFromText(yaml, "z.yaml", {"pipeline.zero=" + zero});
    const CollectivePlans plans(s, BuildCosts(sc, 2), Topology(sc.topology), sc.pipeline.ReplicaDevices());
    return std::pair{plans.AloneNsOf(0), plans.of(0).phases.size()};
  };
  const auto [one, one_phases] = alone("1");
  ASSERT_GT(one, 0);
  EXPECT_NEAR(alone("2").first, one / 2, 2);
  EXPECT_EQ(alone("3").first, 0);
  EXPECT_EQ(alone("3").second, 0U);
  // The weights' all-gather beside the next step (param_gather_overlap): ZeRO-1 keeps the
  // reduce-scatter, half the ring; ZeRO-2 has nothing left.
  const auto overlapped = [&](const std::string& zero) {
    const Scenario sc =
        LoadScenarioFromText(yaml, "z.yaml", {"pipeline.zero=" + zero, "pipeline.param_gather_overlap=true"});
    return CollectivePlans(s, BuildCosts(sc, 2), Topology(sc.topology), sc.pipeline.ReplicaDevices()).AloneNsOf(0);
  };
  EXPECT_NEAR(overlapped("1"), one / 2, 2);
  EXPECT_EQ(overlapped("2"), 0);
}

// fp32 gradients of bf16 weights (Megatron-LM's default): ZeRO-2's reduce-scatters move twice the
// weights' bytes, its gradients are held at 4 bytes, its REDUCE_GRAD (the weights' all-gather) at 2.
TEST(ShardedZero, Fp32GradientsScatterAtTheirOwnBytes) {
  const std::string yaml = Yaml(4, 16);
  const Scenario one = LoadScenarioFromText(yaml, "z.yaml", {});
  const Scenario two = LoadScenarioFromText(yaml, "z.yaml", {"pipeline.zero=2", "training.grad_dtype=fp32"});
  const StageCost z1 = BuildCosts(one, 2).stages[0], z2 = BuildCosts(two, 2).stages[0];
  EXPECT_EQ(z2.grad_bytes, z1.grad_bytes);  // half of twice
  EXPECT_EQ(z2.ReduceBytes(), z1.weight_bytes / 2);
  EXPECT_EQ(z2.backward_weight_ns, Beside(z1.backward_weight_ns, OnePassNs(2.0 * z1.weight_bytes), 2));
}

TEST(ShardedZero, BadValuesAreOneLineAtTheirKey) {
  const std::string yaml = Yaml(4, 16);
  for (const char* bad : {"pipeline.zero=4", "pipeline.zero=-1"}) {
    EXPECT_NE(ErrorOf([&] { LoadScenarioFromText(yaml, "z.yaml", {bad}); }).find("pipeline.zero"), std::string::npos)
        << bad;
  }
  EXPECT_EQ(ErrorOf([&] { LoadScenarioFromText(yaml, "z.yaml", {"pipeline.zero=3"}); }), "");
  // Only the transformer's cost models shard weights and gradients layer by layer.
  const std::string mlp = std::string(STAGECRAFT_SOURCE_DIR) + "/scenarios/mlp-cpu.yaml";
  const std::vector<std::string> two = {"pipeline.ranks=1", "pipeline.data_parallel=2"};
  EXPECT_EQ(ErrorOf([&] { LoadScenario(mlp, {two[0], two[1], "pipeline.zero=1"}); }), "");
  EXPECT_EQ(ErrorOf([&] { LoadScenario(mlp, {two[0], two[1], "pipeline.zero=2"}); }),
            "--set pipeline.zero: 2 shards the weights' gradients layer by layer: it needs model.transformer (the cost "
            "models that shard them)");
}

}  // namespace
}  // namespace stagecraft::sim
