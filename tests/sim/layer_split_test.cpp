// Tests for sim/src/layer_split.cpp: even and balanced splits worked by hand, the balanced
// search's bounds, and the split a scenario takes from the cost model that has its layers.
#include "stagecraft/sim/layer_split.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "sim_test_util.h"

namespace stagecraft::sim {
namespace {

using testing::ErrorOf;
using testing::ScratchDir;

TEST(SplitLayers, ExtrasGoToTheFirstStages) {
  EXPECT_EQ(SplitLayers(5, 2, "m"), (std::vector<int>{3, 2}));
  EXPECT_EQ(SplitLayers(7, 3, "m"), (std::vector<int>{3, 2, 2}));
  EXPECT_EQ(SplitLayers(4, 4, "m"), (std::vector<int>{1, 1, 1, 1}));
  EXPECT_EQ(ErrorOf([] { SplitLayers(5, 6, "model.transformer"); }),
            "model.transformer has 5 layers; it cannot be split over 6 stages");
}

// Balanced splits worked by hand: the minimum over contiguous splits of the costliest stage.
TEST(PartitionLayers, HandWorkedSplits) {
  // [1, 1, 1, 1, 4] in 2 stages: {4, 1} costs max(4, 4) = 4; the even {3, 2} costs 5.
  EXPECT_EQ(PartitionLayers({1, 1, 1, 1, 4}, {0, 0}, "m"), (std::vector<int>{4, 1}));
  // 8 equal layers, 2 units of LM head on the last stage: {5, 3} costs max(5, 3 + 2) = 5.
  EXPECT_EQ(PartitionLayers(std::vector<double>(8, 1.0), {0, 2}, "m"), (std::vector<int>{5, 3}));
  // Uniform layers and no extras: exactly the even split, extras to the first stages.
  EXPECT_EQ(PartitionLayers(std::vector<double>(7, 1.0), {0, 0, 0}, "m"), (std::vector<int>{3, 2, 2}));
  // [5, 1, 1, 1, 1, 1] in 3 stages: the 5 alone, then {3, 2} or {2, 3}; the optimum is 5 and
  // both keep it, so the one nearer the even boundaries (2, 4) wins: {1, 3, 2}.
  EXPECT_EQ(PartitionLayers({5, 1, 1, 1, 1, 1}, {0, 0, 0}, "m"), (std::vector<int>{1, 3, 2}));
  EXPECT_EQ(ErrorOf([] { PartitionLayers({1, 1}, {0, 0, 0}, "model.mlp"); }),
            "model.mlp has 2 layers; it cannot be split over 3 stages");
}

// The balanced partition's exact search is bounded: its (k + 1) x (n + 1) table to 2^25 cells,
// its k (n - k + 1)^2 / 2 steps to 2^31; n == k needs no search at all.
TEST(PartitionLayers, SearchIsBounded) {
  EXPECT_EQ(PartitionLayers(std::vector<double>(1 << 16, 1.0), std::vector<double>(1 << 16, 0.0), "model.mlp"),
            std::vector<int>(1 << 16, 1));
  EXPECT_EQ(ErrorOf([] { PartitionLayers(std::vector<double>(8192, 1.0), std::vector<double>(4096, 0.0), "model.mlp"); }),
            "model.mlp has 8192 layers over 4096 stages: too many for pipeline.partition: balanced (an exact search "
            "of every split, at most 2^25 layers x stages and 2^31 steps); use partition: even");
  // 2 stages over 46343 layers: 2 x 46342^2 / 2 = 2147580964 steps, just past 2^31.
  EXPECT_NE(ErrorOf([] { PartitionLayers(std::vector<double>(46343, 1.0), std::vector<double>(2, 0.0), "m"); }), "");
  const std::vector<int> split = PartitionLayers(std::vector<double>(1000, 1.0), std::vector<double>(100, 0.0), "m");
  EXPECT_EQ(split, std::vector<int>(100, 10));
}

// The extras join the first and the last stage, both the one stage when there is one.
TEST(SplitWeights, ExtrasOnTheEndStages) {
  const LayerWeights weights{"m", 6, {1, 1, 1, 1, 1, 1}, 2.0, 3.0};
  // {1, 3, 2} costs max(1 + 2, 3, 2 + 3) = 5; {2, 3, 1} costs max(4, 3, 4) = 4.
  EXPECT_EQ(SplitWeights(weights, 3, Partition::kBalanced), (std::vector<int>{2, 3, 1}));
  EXPECT_EQ(SplitWeights(weights, 3, Partition::kEven), (std::vector<int>{2, 2, 2}));
  EXPECT_EQ(SplitWeights(weights, 1, Partition::kBalanced), (std::vector<int>{6}));
  // No per-layer costs: every layer costs 1.
  EXPECT_EQ(SplitWeights(LayerWeights{"m", 8, {}, 0.0, 2.0}, 2, Partition::kBalanced), (std::vector<int>{5, 3}));
}

// pipeline.partition: [n0, n1, ...] is taken as written, whatever the costs; a list of another
// length or sum is refused with one line naming both; the scenario reads a list as kGiven, and
// validation names the key and the stages it needs.
TEST(SplitWeights, AGivenListIsTakenAsItIs) {
  const LayerWeights weights{"m", 6, {1, 1, 1, 1, 1, 1}, 2.0, 3.0};
  EXPECT_EQ(SplitWeights(weights, 3, Partition::kGiven, {1, 4, 1}), (std::vector<int>{1, 4, 1}));
  EXPECT_EQ(ErrorOf([&] { SplitWeights(weights, 3, Partition::kGiven, {2, 2, 3}); }),
            "pipeline.partition lists 3 stage(s) holding 7 layer(s); m has 6 layer(s) over 3 stage(s) (ranks x "
            "chunks)");
  EXPECT_NE(ErrorOf([&] { SplitWeights(weights, 2, Partition::kGiven, {1, 4, 1}); }).find("lists 3 stage(s)"),
            std::string::npos);
  ScratchDir dir;
  const std::string base =
      "name: t\ntopology: {device: {name: d, peak: 1TFLOPS, memory: 80GiB}, devices_per_node: 4, links: [{scope: "
      "node, bandwidth: 100GB/s, latency: 1us}]}\n"
      "model: {transformer: {layers: 10, hidden: 64, heads: 4, seq: 16, vocab: 100}}\n"
      "pipeline: {schedule: 1f1b, ranks: 4, microbatches: 4, partition: ";
  const Scenario given = LoadScenario(dir.Write("g.yaml", base + "[2, 3, 3, 2]}\n"), {});
  EXPECT_EQ(given.pipeline.partition, Partition::kGiven);
  EXPECT_EQ(StageLayers(given, 4), (std::vector<int>{2, 3, 3, 2}));
  EXPECT_NE(testing::LoadError(dir, base + "[2, 3, 3, 3]}\n").find(
                "pipeline.partition: expected 10 layers in all (model.transformer.layers), got 4 stage(s) holding 11"),
            std::string::npos)
      << testing::LoadError(dir, base + "[2, 3, 3, 3]}\n");
  EXPECT_NE(testing::LoadError(dir, base + "given}\n").find("expected one of even, balanced"), std::string::npos);
}

// Megatron-LM's --account-for-embedding-in-pipeline-split and --account-for-loss-in-pipeline-split:
// a list of every stage may leave the first and the last stage without a layer (the embedding
// alone, the head and loss alone), even with fewer layers than stages; a stage between them
// without one is refused at the key. The empty stages cost what they hold: the first only the
// embedding's F and W, the last the head and loss, both far below a middle stage's layer.
TEST(SplitWeights, TheFirstAndLastStagesMayHoldTheEmbeddingOrTheLossAlone) {
  ScratchDir dir;
  const std::string base =
      "name: t\ntopology: {device: H100-SXM, devices_per_node: 4, links: [{scope: node, bandwidth: 100GB/s, latency: "
      "1us}]}\n"
      "model: {transformer: {layers: 2, hidden: 1024, heads: 8, seq: 256, vocab: 32000}}\n"
      "pipeline: {schedule: 1f1b, ranks: 4, microbatches: 4, partition: ";
  const Scenario ends = LoadScenario(dir.Write("e.yaml", base + "[0, 1, 1, 0]}\n"), {});
  EXPECT_EQ(StageLayers(ends, 4), (std::vector<int>{0, 1, 1, 0}));
  const CostTable costs = BuildCosts(ends, 4);
  ASSERT_EQ(costs.stages.size(), 4u);
  EXPECT_GT(costs.stages[0].forward_ns, 0);
  EXPECT_LT(costs.stages[0].forward_ns, costs.stages[1].forward_ns / 4);
  EXPECT_EQ(costs.stages[1].forward_ns, costs.stages[2].forward_ns);
  EXPECT_GT(costs.stages[3].forward_ns, 0);  // the head's GEMM and the loss
  EXPECT_NE(testing::LoadError(dir, base + "[1, 0, 1, 0]}\n")
                .find("pipeline.partition: gives stage 1 no layer; only the first and the last stage may have none"),
            std::string::npos)
      << testing::LoadError(dir, base + "[1, 0, 1, 0]}\n");
  // Without a list, 2 layers over 4 stages is refused as before.
  EXPECT_NE(testing::LoadError(dir, base + "even}\n").find("expected at least 4 layers, one per stage"),
            std::string::npos);
}

// A list with an entry per rank, for a shape of v stages per rank: each rank's layers split over
// its own stages, earlier chunks taking the remainder. Worked by hand for 4 ranks, 24 layers,
// ranks holding {5, 6, 6, 7}: rank 0's 5 is {3, 2}, rank 3's 7 is {4, 3}. Under the loop
// placement chunk c of rank r is stage 4c + r; under the V, chunk 1 of rank r is stage 7 - r.
TEST(SplitWeights, AListPerRankIsSplitOverEachRanksStages) {
  const LayerWeights weights{"m", 24, {}, 0.0, 0.0};
  PipelineSpec pipeline;
  pipeline.ranks = 4;
  pipeline.partition = Partition::kGiven;
  pipeline.partition_layers = {5, 6, 6, 7};
  using schedules::Placement;
  using schedules::Shape;
  EXPECT_EQ(SplitWeights(weights, Shape{4, 2, Placement::kLoop}, pipeline), (std::vector<int>{3, 3, 3, 4, 2, 3, 3, 3}));
  EXPECT_EQ(SplitWeights(weights, Shape{4, 2, Placement::kV}, pipeline), (std::vector<int>{3, 3, 3, 4, 3, 3, 3, 2}));
  EXPECT_EQ(SplitWeights(weights, Shape{4, 1, Placement::kLoop}, pipeline), (std::vector<int>{5, 6, 6, 7}));
  pipeline.partition_layers = {2, 7, 7, 8};  // rank 0 cannot fill 3 stages
  EXPECT_EQ(ErrorOf([&] { SplitWeights(weights, Shape{4, 3, Placement::kLoop}, pipeline); }),
            "pipeline.partition gives rank 0 2 layer(s), fewer than its 3 stages");
}

// The tiny transformer (b = 2, s = 4, h = 8, V = 10): its LM head, 2bshV = 1280 FLOPs, is
// 0.096 of a layer's forward (13312): with 5 layers on 2 stages the balanced split is still
// {3, 2} (3 vs 2.096); with 4 layers it is {2, 2}. The GPT-1.3B head (2·V/(24h(1 + s/6h)) =
// 1.75 layers) moves a layer off the last stage.
TEST(StageLayers, BalancedFollowsTheLmHead) {
  Scenario s = testing::UnitScenario(2, "gpipe", 2);
  s.model.transformer = TransformerSpec{4, 8, 2, 4, 10};
  s.pipeline.partition = Partition::kBalanced;
  EXPECT_EQ(StageLayers(s, 2), (std::vector<int>{2, 2}));
  s.model.transformer->layers = 5;
  EXPECT_EQ(StageLayers(s, 2), (std::vector<int>{3, 2}));
  s.model.transformer = TransformerSpec{24, 2048, 16, 2048, 50257};
  // 8 stages of 24 layers: even is 3 each, the last costing 4.75; moving one layer to
  // stage 0.. gives a max of 4 with the last stage holding 2 (+1.75 = 3.75).
  const std::vector<int> split = StageLayers(s, 8);
  EXPECT_EQ(split.back(), 2);
  int total = 0;
  for (int n : split) {
    EXPECT_LE(n, 4);
    total += n;
  }
  EXPECT_EQ(total, 24);
  s.pipeline.partition = Partition::kEven;
  EXPECT_EQ(StageLayers(s, 8), std::vector<int>(8, 3));
}

// The profile's layers come first (the cost table's order): its measured times weigh them.
TEST(StageLayers, TheProfileWeighsItsLayers) {
  ScratchDir dir;
  Scenario s = testing::UnitScenario(2, "gpipe");
  s.model.mlp = MlpSpec{4, 8};
  const std::string layer = "{forward: 1ms, backward_input: 1ms, backward_weight: 1ms, activation_bytes: 0, "
                            "weight_bytes: 0}";
  const std::string heavy = "{forward: 9ms, backward_input: 0, backward_weight: 0, activation_bytes: 0, "
                            "weight_bytes: 0}";
  testing::ReadProfileInto(&s, dir.Write("p.yaml", "microbatch_size: 1\nlayers: [" + heavy + ", " + layer + ", " +
                                                       layer + ", " + layer + "]\n"));
  s.pipeline.partition = Partition::kBalanced;
  // [9, 3, 3, 3] ms: {1, 3} costs max(9, 9) = 9; the even {2, 2} costs 12.
  EXPECT_EQ(StageLayers(s, 2), (std::vector<int>{1, 3}));
  s.model.profile.reset();  // the mlp's own layers, all alike
  EXPECT_EQ(StageLayers(s, 2), (std::vector<int>{2, 2}));
}

TEST(StageLayers, ExplicitCostsHaveNoLayers) {
  Scenario s = testing::UnitScenario(2, "gpipe");
  s.model.costs = ExplicitCosts{};
  EXPECT_EQ(ErrorOf([&] { StageLayers(s, 2); }),
            "test.yaml: the model has no layers to split over stages (explicit costs are per rank)");
  s.model.mlp = MlpSpec{4, 8};  // beside explicit costs, the network's layers
  EXPECT_EQ(StageLayers(s, 2), (std::vector<int>{2, 2}));
}

}  // namespace
}  // namespace stagecraft::sim
