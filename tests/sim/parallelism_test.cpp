// Tests for the parallelism around the pipeline in the simulator: the ring collectives against
// nccl-tests' bus-bandwidth definitions, the placement of a P x D x T job on the topology, the
// transformer's costs sharded over a tensor group (Korthikanti et al. 2022, Table 2, worked by
// hand), ZeRO-1 and the data group's gradient all-reduce, the engine routing a pipeline whose
// neighbours sit on other nodes, and the scenario's checks.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "sim_test_util.h"
#include "stagecraft/sim/collectives.h"
#include "stagecraft/sim/cost_models.h"
#include "stagecraft/sim/engine.h"
#include "stagecraft/sim/scenario_checks.h"

namespace stagecraft::sim {
namespace {

using testing::kMs;

// nccl-tests (doc/PERFORMANCE.md): algbw = bytes / time; all-reduce busbw = algbw·2(n−1)/n,
// reduce-scatter and all-gather busbw = algbw·(n−1)/n. On a ring without latency, the bus
// bandwidth is the link's.
TEST(Collectives, RingBusBandwidthIsTheLinksAsNcclTestsDefinesIt) {
  const RingLink link{50e9, 0};
  const double bytes = 1e9;
  for (const int n : {2, 4, 8, 64}) {
    const double all_reduce_s = AllReduceNs(bytes, n, link) * 1e-9;
    EXPECT_NEAR(bytes / all_reduce_s * 2 * (n - 1) / n, 50e9, 1) << "n=" << n;
    for (const double ns : {ReduceScatterNs(bytes, n, link), AllGatherNs(bytes, n, link)}) {
      EXPECT_NEAR(bytes / (ns * 1e-9) * (n - 1) / n, 50e9, 1) << "n=" << n;
    }
  }
  EXPECT_EQ(AllReduceNs(bytes, 1, link), 0) << "a group of one moves nothing";
}

TEST(Collectives, EachStepPaysTheLatency) {
  // 4 ranks, 1 GB at 100 GB/s, 1 us per step: 6 steps and 1.5 GB through each link.
  const RingLink link{100e9, 1000};
  EXPECT_DOUBLE_EQ(AllReduceNs(1e9, 4, link), 6 * 1000 + 15e6);
  EXPECT_DOUBLE_EQ(ReduceScatterNs(1e9, 4, link), 3 * 1000 + 7.5e6);
}

TEST(Collectives, TheRingIsBoundByTheScopeItsDevicesSpan) {
  TopologySpec spec;
  spec.nodes = 2;
  spec.devices_per_node = 8;
  spec.links = {{LinkScope::kNode, 450e9, 2000}, {LinkScope::kCluster, 50e9, 5000}};
  const RingLink inside = RingLinkOf(spec, {0, 1, 2, 3, 4, 5, 6, 7});
  EXPECT_EQ(inside.bytes_per_s, 450e9);
  EXPECT_EQ(inside.latency_ns, 2000);
  const RingLink across = RingLinkOf(spec, {0, 8});
  EXPECT_EQ(across.bytes_per_s, 50e9);
  EXPECT_EQ(across.latency_ns, 5000);
  EXPECT_TRUE(std::isinf(RingLinkOf(spec, {3}).bytes_per_s));
}

// Megatron's order, tensor innermost: device = t + T·(d + D·r).
TEST(Placement, TensorInnermostThenDataThenPipeline) {
  PipelineSpec p;
  p.ranks = 2;
  p.data_parallel = 2;
  p.tensor_parallel = 4;
  EXPECT_EQ(p.world(), 16);
  EXPECT_EQ(p.DeviceOf(0, 0, 0), 0);
  EXPECT_EQ(p.DeviceOf(0, 0, 3), 3);
  EXPECT_EQ(p.DeviceOf(0, 1, 0), 4);
  EXPECT_EQ(p.DeviceOf(1, 0, 0), 8);
  EXPECT_EQ(p.DeviceOf(1, 1, 2), 14);
  p.placement = {Axis::kPipeline, Axis::kTensor, Axis::kData};  // r + P·(t + T·d)
  EXPECT_EQ(p.DeviceOf(1, 0, 0), 1);
  EXPECT_EQ(p.DeviceOf(0, 0, 1), 2);
  EXPECT_EQ(p.DeviceOf(1, 1, 2), 1 + 2 * (2 + 4 * 1));
}

// A GPT-3-sized layer: s = 2048, b = 1, h = 12288, a = 96 (5as/h = 80), one layer per stage,
// bf16, T = 8 on one node of 16 (450 GB/s, no latency), on a device doing 10^6 FLOP per ns.
constexpr double kFlopsPerNs = 1e6;

Scenario Gpt3Layer(int tensor_parallel, bool sequence_parallel, Recompute recompute) {
  Scenario s = testing::UnitScenario(2, "gpipe");
  s.topology.device.peak_flops = 2e15;
  s.topology.devices_per_node = 16;
  s.topology.links = {{LinkScope::kNode, 450e9, 0}};
  s.model.transformer = TransformerSpec{2, 12288, 96, 2048, 51200};
  s.training.dtype = Dtype::kBf16;
  s.pipeline.tensor_parallel = tensor_parallel;
  s.pipeline.sequence_parallel = sequence_parallel;
  s.pipeline.recompute = recompute;
  return s;
}

// Korthikanti et al. 2022, Table 2, per layer in bytes of 16-bit tensors, with sbh = 2048·12288:
//   no parallelism sbh(34 + 80) = 114 sbh; tensor parallel sbh(10 + 24/8 + 80/8) = 23 sbh;
//   + sequence parallel sbh/8·114 = 14.25 sbh; selective: sbh(10 + 3) = 13 sbh, + sequence
//   parallel 34/8 = 4.25 sbh; full recompute 2 sbh (2/8 sbh sequence-parallel).
TEST(TensorParallel, ActivationsFollowKorthikantiTableTwo) {
  const double sbh = 2048.0 * 12288;
  const auto first_stage = [](const Scenario& s) { return BuildCosts(s, 2).stages[0].activation_bytes; };
  EXPECT_EQ(first_stage(Gpt3Layer(1, false, Recompute::kNone)), std::llround(114 * sbh));
  EXPECT_EQ(first_stage(Gpt3Layer(8, false, Recompute::kNone)), std::llround(23 * sbh));
  EXPECT_EQ(first_stage(Gpt3Layer(8, true, Recompute::kNone)), std::llround(14.25 * sbh));
  EXPECT_EQ(first_stage(Gpt3Layer(8, false, Recompute::kSelective)), std::llround(13 * sbh));
  EXPECT_EQ(first_stage(Gpt3Layer(8, true, Recompute::kSelective)), std::llround(4.25 * sbh));
  EXPECT_EQ(first_stage(Gpt3Layer(1, false, Recompute::kSelective)), std::llround(34 * sbh));
  EXPECT_EQ(first_stage(Gpt3Layer(8, false, Recompute::kFull)), std::llround(2 * sbh));
  EXPECT_EQ(first_stage(Gpt3Layer(8, true, Recompute::kFull)), std::llround(2 * sbh / 8));
}

// One layer's forward on T = 8: FLOPs / 8 at 10^6 FLOP/ns, plus two all-reduces of the s·b·h bf16
// activation (50,331,648 bytes) over 8 devices at 450 GB/s: 2 · 2·7/8 · 50331648 / 450 = 195,734 ns.
TEST(TensorParallel, ComputeShardsAndEachPassPaysTwoAllReduces) {
  const double s = 2048, h = 12288;
  const double flops = 24 * s * h * h + 4 * s * s * h;
  const double allreduce = 2 * 7.0 / 8 * (s * h * 2) / 450e9 * 1e9;
  const StageCost one = BuildCosts(Gpt3Layer(1, false, Recompute::kNone), 2).stages[0];
  EXPECT_EQ(one.forward_ns, std::llround(flops / kFlopsPerNs));
  const StageCost eight = BuildCosts(Gpt3Layer(8, false, Recompute::kNone), 2).stages[0];
  EXPECT_EQ(eight.forward_ns, std::llround(flops / 8 / kFlopsPerNs + 2 * allreduce));
  EXPECT_EQ(eight.backward_input_ns, std::llround(flops / 8 / kFlopsPerNs + 2 * allreduce));
  EXPECT_EQ(eight.backward_weight_ns, std::llround(flops / 8 / kFlopsPerNs)) << "the weight gradient needs no collective";
  // Selective recompute repeats the attention's 4bs²h inside the backward for inputs.
  const StageCost selective = BuildCosts(Gpt3Layer(8, false, Recompute::kSelective), 2).stages[0];
  EXPECT_EQ(selective.backward_input_ns, std::llround((flops + 4 * s * s * h) / 8 / kFlopsPerNs + 2 * allreduce));
  // A block's parameters on one device: 12h²/8 + 7h/8 + 6h (the row-parallel biases and the
  // LayerNorms replicated), and the embeddings' vocabulary split: (51200/8 + 2048)·h.
  const double block = 12 * h * h / 8 + 7 * h / 8 + 6 * h;
  EXPECT_EQ(eight.weight_bytes, std::llround((block + (51200.0 / 8 + 2048) * h) * 2));
  EXPECT_EQ(eight.send_bytes, std::llround(s * h * 2 / 8)) << "each device sends its share";
}

// ZeRO-1 divides the optimizer state by D; the STEP pays the all-reduce of the stage's bf16
// gradients over its D replicas, here on 4 nodes (cluster link 25 GB/s, 10 us per step).
TEST(DataParallel, ZeroShardsTheOptimizerAndTheReduceGradMovesTheGradients) {
  Scenario s = Gpt3Layer(1, false, Recompute::kNone);
  s.topology.nodes = 4;
  s.topology.devices_per_node = 2;
  s.topology.links = {{LinkScope::kNode, 450e9, 0}, {LinkScope::kCluster, 25e9, 10'000}};
  s.pipeline.data_parallel = 4;
  const StageCost plain = BuildCosts(s, 2).stages[0];
  s.pipeline.zero = 1;
  const StageCost zero = BuildCosts(s, 2).stages[0];
  EXPECT_EQ(zero.optimizer_bytes, plain.optimizer_bytes / 4);
  EXPECT_EQ(zero.weight_bytes, plain.weight_bytes);
  EXPECT_EQ(zero.grad_bytes, plain.grad_bytes) << "reduce-scatter + all-gather move what an all-reduce moves";
  EXPECT_EQ(plain.step_ns, 0) << "the STEP holds no all-reduce: REDUCE_GRAD runs it";
  // Replicas of rank 0 on devices 0, 1, 2, 3: two nodes of two, so the hierarchical all-reduce:
  // in each node a reduce-scatter and an all-gather of G/2 over 450 GB/s, across the two
  // nodes an all-reduce of G/2 (2 steps of 10 us, G/2 each way at 25 GB/s).
  const Topology machine(s.topology);
  const std::vector<int> group = s.pipeline.ReplicaDevices()[0];
  EXPECT_EQ(group, (std::vector<int>{0, 1, 2, 3}));
  const double g = static_cast<double>(plain.grad_bytes);
  const CollectivePlan plan = PlanAllReduce(machine, group, plain.grad_bytes);
  EXPECT_EQ(plan.algorithm, CollectiveAlgorithm::kHierarchical);
  EXPECT_NEAR(PlanAloneNs(machine, plan), 2 * (0.5 * g / 450e9 * 1e9) + 2 * 10'000 + 0.5 * g / 25e9 * 1e9, 3);
}

// With T = 4 on nodes of 4, pipeline rank 1 sits on device 4, another node: its activation
// crosses the cluster link (5 us) instead of the node's (1 us).
TEST(Placement, PipelineNeighboursOnAnotherNodeUseTheClusterLink) {
  const schedules::Schedule s = testing::Make("gpipe", 2, 1);
  const Topology topo = testing::Node(4, 100e9, 1000, 2, 10e9, 5000);
  const auto recv_end = [&](std::vector<int> devices) {
    SimConfig config;
    config.rank_devices = std::move(devices);
    const RunRecord r = Simulate(s, testing::Uniform(2, kMs, kMs, kMs), topo, config);
    for (size_t i = 0; i < s.ops[1].size(); ++i) {
      if (s.ops[1][i].kind == schedules::OpKind::kRecvF) return r.ranks[1].ops[i].end_ns;
    }
    return int64_t{-1};
  };
  EXPECT_EQ(recv_end({}), kMs + 1000);
  EXPECT_EQ(recv_end({0, 4}), kMs + 5000);
}

std::string Problems(const Scenario& s) { return DescribeProblems(s, Validate(s)); }

TEST(ParallelismChecks, OneLinePerProblem) {
  Scenario s = Gpt3Layer(8, false, Recompute::kNone);
  s.pipeline.data_parallel = 2;
  EXPECT_EQ(Problems(s), "test.yaml: pipeline: the job needs pipeline.ranks x data_parallel x tensor_parallel = "
                         "2 x 2 x 8 = 32 devices but the topology has 16");
  s = Gpt3Layer(1, true, Recompute::kNone);
  EXPECT_EQ(Problems(s), "test.yaml: pipeline.sequence_parallel: shards the activations over the tensor-parallel "
                         "group: it needs pipeline.tensor_parallel > 1");
  s = Gpt3Layer(5, false, Recompute::kNone);
  EXPECT_EQ(Problems(s), "test.yaml: pipeline.tensor_parallel: must divide model.transformer.heads (96): each "
                         "device holds whole attention heads, got 5");
  s = testing::UnitScenario(2, "gpipe");
  s.model.mlp = MlpSpec{4, 16};
  s.pipeline.tensor_parallel = 2;
  s.topology.devices_per_node = 4;
  s.topology.links = {{LinkScope::kNode, 450e9, 0}};
  EXPECT_EQ(Problems(s), "test.yaml: pipeline.tensor_parallel: only model.transformer's cost model shards layers "
                         "over a tensor-parallel group (for model.costs or a profile, state one shard's costs)");
  s.pipeline.tensor_parallel = 1;
  s.pipeline.recompute = Recompute::kSelective;
  EXPECT_EQ(Problems(s), "test.yaml: pipeline.recompute: selective recomputes the attention's softmax and dropout: "
                         "it needs model.transformer (none and full work for every model)");
  s.pipeline.recompute = Recompute::kNone;
  s.pipeline.placement = {Axis::kData, Axis::kData, Axis::kPipeline};
  EXPECT_EQ(Problems(s), "test.yaml: pipeline.placement: expected the three axes tensor, data and pipeline, each "
                         "once, innermost first");
}

TEST(ParallelismKeys, ReadFromYamlWithTheirDefaults) {
  const testing::ScratchDir dir;
  const std::string base =
      "name: hybrid\n"
      "topology: {device: {name: h100, peak: 1PFLOPS, memory: 80GiB}, nodes: 2, devices_per_node: 8,\n"
      "           links: [{scope: node, bandwidth: 450GB/s, latency: 2us}, {scope: cluster, bandwidth: 50GB/s, "
      "latency: 5us}]}\n"
      "model: {transformer: {layers: 4, hidden: 1024, heads: 16, seq: 1024, vocab: 50257}}\n"
      "pipeline:\n"
      "  schedule: 1f1b\n"
      "  ranks: 2\n"
      "  microbatches: 4\n";
  const Scenario plain = LoadScenario(dir.Write("plain.yaml", base), {});
  EXPECT_EQ(plain.pipeline.data_parallel, 1);
  EXPECT_EQ(plain.pipeline.tensor_parallel, 1);
  EXPECT_FALSE(plain.pipeline.sequence_parallel);
  EXPECT_EQ(plain.pipeline.zero, 0);
  EXPECT_EQ(plain.pipeline.recompute, Recompute::kNone);
  EXPECT_EQ(plain.pipeline.placement, (std::vector<Axis>{Axis::kTensor, Axis::kData, Axis::kPipeline}));
  const Scenario hybrid = LoadScenario(dir.Write("hybrid.yaml", base +
                                                                    "  data_parallel: 2\n"
                                                                    "  tensor_parallel: 4\n"
                                                                    "  sequence_parallel: true\n"
                                                                    "  zero: 1\n"
                                                                    "  recompute: selective\n"
                                                                    "  placement: [tensor, pipeline, data]\n"),
                                       {});
  EXPECT_EQ(hybrid.pipeline.world(), 16);
  EXPECT_TRUE(hybrid.pipeline.sequence_parallel);
  EXPECT_FALSE(hybrid.pipeline.tensor_parallel_overlap);
  EXPECT_TRUE(LoadScenario(dir.Write("o.yaml", base + "  tensor_parallel: 4\n  tensor_parallel_overlap: true\n"), {})
                  .pipeline.tensor_parallel_overlap);
  // Megatron-LM's --overlap-grad-reduce: off unless stated, read into the cost table.
  EXPECT_FALSE(plain.pipeline.grad_reduce_overlap);
  EXPECT_FALSE(BuildCosts(plain, 2).grad_reduce_overlap);
  const Scenario overlapped =
      LoadScenario(dir.Write("g.yaml", base + "  data_parallel: 2\n  grad_reduce_overlap: true\n"), {});
  EXPECT_TRUE(overlapped.pipeline.grad_reduce_overlap);
  EXPECT_TRUE(BuildCosts(overlapped, 2).grad_reduce_overlap);
  const std::string maybe = base + "  tensor_parallel_overlap: maybe\n";
  EXPECT_NE(testing::LoadError(dir, maybe).find(": pipeline.tensor_parallel_overlap: "), std::string::npos)
      << testing::LoadError(dir, maybe);
  EXPECT_EQ(hybrid.pipeline.zero, 1);
  EXPECT_EQ(hybrid.pipeline.recompute, Recompute::kSelective);
  EXPECT_EQ(hybrid.pipeline.DeviceOf(1, 1, 0), 4 + 8);
  for (const auto& [text, recompute] : {std::pair{"true", Recompute::kFull}, std::pair{"false", Recompute::kNone},
                                        std::pair{"full", Recompute::kFull}}) {
    EXPECT_EQ(LoadScenario(dir.Write("r.yaml", base + "  recompute: " + text + "\n"), {}).pipeline.recompute,
              recompute)
        << text;
  }
  const std::string twice = base + "  placement: [tensor, tensor, pipeline]\n";
  EXPECT_EQ(testing::LoadError(dir, twice), dir.Path("scenario.yaml") + ":" +
                                                testing::PosOf(twice, "tensor, pipeline]") +
                                                ": pipeline.placement.1: 'tensor' is listed twice");
  const std::string big = base + "  data_parallel: 4\n  tensor_parallel: 8\n";
  EXPECT_EQ(testing::LoadError(dir, big), dir.Path("scenario.yaml") + ":" + testing::PosOf(big, "schedule") +
                                              ": pipeline: the job needs pipeline.ranks x data_parallel x "
                                              "tensor_parallel = 2 x 4 x 8 = 64 devices but the topology has 16");
}

}  // namespace
}  // namespace stagecraft::sim
