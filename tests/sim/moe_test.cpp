// Mixture-of-experts layers and expert parallelism (issue 56 points 2-3, DESIGN.md §10): the
// parameter counts against Mistral AI's published ones for Mixtral 8x7B, the analytical costs of
// a tiny MoE stage worked by hand, the all-to-all plan's flows against every pair's, the
// ALL_TO_ALLs placed in a schedule and checked by Validate, and a run's all-to-all timed by hand.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "sim_test_util.h"
#include "stagecraft/schedules/all_to_all.h"
#include "stagecraft/schedules/bubble_split.h"
#include "stagecraft/schedules/validate.h"
#include "stagecraft/sim/collectives.h"
#include "stagecraft/sim/cost_models.h"
#include "stagecraft/sim/engine.h"
#include "stagecraft/sim/gpt_kernels.h"

namespace stagecraft::sim {
namespace {

using schedules::Op;
using schedules::OpKind;
using schedules::Tensor;
using testing::kMs;

// Mixtral 8x7B (Jiang et al. 2024, "Mixtral of Experts"; Mistral AI: "46.7B total parameters but
// only uses 12.9B parameters per token"): 32 layers of 4096, 32 query and 8 key-value heads, 8
// experts of a 14336 SwiGLU, top-2, a 32,000-token vocabulary, untied head. This layout's counts
// (GPT's biases and LayerNorms in attention, learned positions where Mixtral has RoPE) land within
// 0.2% of both.
TEST(Moe, MixtralParametersMatchThePublishedCounts) {
  TransformerSpec t{32, 4096, 32, 4096, 32000};
  t.ffn_hidden = 14336, t.activation = FfnActivation::kSwiglu, t.kv_heads = 8;
  t.moe = MoeSpec{.experts = 8, .top_k = 2};
  const double embeddings = 2.0 * 32000 * 4096;  // the token embedding and the LM head
  const double total = 32.0 * static_cast<double>(MoeBlockParams(t)) + embeddings;
  const double active = 32.0 * static_cast<double>(ActiveMoeBlockParams(t)) + embeddings;
  EXPECT_NEAR(total / 46.7e9, 1.0, 0.002);
  EXPECT_NEAR(active / 12.9e9, 1.0, 0.002);
  EXPECT_EQ(ExpertParams(t), 3LL * 4096 * 14336);  // gate, up and down, no biases
  EXPECT_EQ(RouterParams(t), 4096LL * 8);
  EXPECT_FALSE(t.IsGpt2Block());
  EXPECT_EQ(t.MoeLayersIn(0, 32), 32);
}

// Which layers are MoE layers: Megatron-LM's moe_layer_freq (every) after DeepSeek-V3's dense
// first layers (first_dense), and the model FLOPs per token counting a MoE layer's active
// parameters: 6 x (dense blocks + MoE blocks' active + V·h) + 12·L·h·s.
TEST(Moe, LayerKindsAndModelFlops) {
  TransformerSpec t{6, 8, 2, 4, 10};
  t.moe = MoeSpec{.experts = 4, .top_k = 2, .expert_hidden = 6, .shared_experts = 1, .every = 2, .first_dense = 1};
  std::vector<bool> kinds;
  for (int l = 0; l < 6; ++l) kinds.push_back(t.IsMoeLayer(l));
  EXPECT_EQ(kinds, (std::vector<bool>{false, true, false, true, false, true}));
  EXPECT_EQ(t.MoeLayersIn(2, 3), 1);
  // GELU: an expert 2·8·6 = 96; the router 32; attention 8·24 + 24 + 64 + 8 = 288; LayerNorms 32.
  EXPECT_EQ(ExpertParams(t), 96);
  EXPECT_EQ(MoeBlockParams(t), 288 + 32 + 5 * 96 + 32);
  EXPECT_EQ(ActiveMoeBlockParams(t), 288 + 32 + 3 * 96 + 32);
  const double dense = static_cast<double>(TransformerBlockParams(t));  // 288 + 8·32 + 32 + 32·8 + 8 + 32
  EXPECT_EQ(dense, 288 + 2 * 8 * 32 + 32 + 8 + 32);
  EXPECT_DOUBLE_EQ(TransformerModelFlopsPerToken(t), 6 * (3 * dense + 3 * 640.0 + 80) + 12.0 * 6 * 8 * 4);
}

// testing::TinyMoeScenario (sim_test_util.h), worked by hand. Per microbatch (4 tokens):
//   forward FLOPs: attention 2·4·8·24 + 2·(2·2·4·4·4) + 2·4·8·8 = 1536 + 512 + 512 = 2560;
//     the router 2·4·8·4 = 256; two experts a token 2·2·4·(2·8·6) = 1536: 4352
//   weights: attention 288, the router 32, LayerNorms 32, 4 / 2 = 2 experts of 96: 544
//   all-to-alls: an F's dispatch and combine, 4 tokens x 2 copies x 8 wide x 2 bytes = 128 each.
Scenario TinyMoe() { return testing::TinyMoeScenario(); }

TEST(Moe, AnalyticalStageCostsByHand) {
  const CostTable t = BuildCosts(TinyMoe(), 2);
  const StageCost& first = t.stages[0];
  EXPECT_EQ(first.forward_ns, 4352);
  EXPECT_EQ(first.weight_bytes, (544 + (10 + 4) * 8) * 2);  // + the embeddings
  EXPECT_EQ(first.a2a_forward, 2);
  EXPECT_EQ(first.a2a_backward, 2);
  EXPECT_EQ(first.a2a_bytes, 128);
  // The routed experts' 192 gradients reduce over D·T/E = 1 holder: nothing to move; the rest
  // over the two replicas.
  EXPECT_EQ(first.ReduceBytes(), (544 - 192 + 112) * 4);  // bf16's gradients in fp32 (Megatron-LM's)
  EXPECT_EQ(first.grad_bytes, 2 * first.weight_bytes);
  // Without expert parallelism a device holds all four experts and runs no all-to-all.
  Scenario whole = TinyMoe();
  whole.pipeline.expert_parallel = 1;
  const CostTable whole_table = BuildCosts(whole, 2);
  const StageCost& alone = whole_table.stages[0];
  EXPECT_EQ(alone.weight_bytes, (544 + 192 + 112) * 2);
  EXPECT_EQ(alone.a2a_forward, 0);
  EXPECT_EQ(alone.forward_ns, 4352);  // the same FLOPs, all on the device
}

// training.fp8_dispatch (DeepSeek-V3's): F's dispatch sends 64 elements in FP8 with a float scale
// per 128 (64·(1 + 4/128) = 66 bytes), its combine 64 at bf16 (128 bytes); each all-to-all is
// charged their mean, 97 bytes, so a pass's two move 194 (the same in the backward: the combine's
// gradient in FP8, the dispatch's at bf16).
TEST(Moe, Fp8DispatchSendsHalfOfEachPassesAllToAllsInFp8) {
  Scenario s = TinyMoe();
  s.training.fp8 = true;
  s.training.fp8_dispatch = true;
  const CostTable t = BuildCosts(s, 2);
  EXPECT_EQ(t.stages[0].a2a_bytes, 97);
  EXPECT_EQ(t.stages[0].a2a_forward, 2);
  EXPECT_EQ(t.stages[0].a2a_backward, 2);
  s.training.fp8_dispatch = false;
  EXPECT_EQ(BuildCosts(s, 2).stages[0].a2a_bytes, 128);
}

// Dropless routing with the busiest device computing 1.5 x its even share (load_imbalance): every
// device of the group waits for it, so each is charged its experts' 1536 FLOPs x 1.5 = 2304 and
// all-to-alls of 128 x 1.5 = 192 bytes; the attention and the router are the same, and so are
// the model FLOPs (the useful work) and the memory (the busiest device changes layer by layer).
TEST(Moe, LoadImbalanceChargesTheBusiestDevicesShare) {
  Scenario s = TinyMoe();
  s.model.transformer->moe->load_imbalance = 1.5;
  const CostTable t = BuildCosts(s, 2);
  EXPECT_EQ(t.stages[0].forward_ns, 4352 + 768);
  EXPECT_EQ(t.stages[0].a2a_bytes, 192);
  const CostTable even = BuildCosts(TinyMoe(), 2);
  EXPECT_EQ(t.stages[0].activation_bytes, even.stages[0].activation_bytes);
  EXPECT_EQ(t.stages[0].w_stash_bytes, even.stages[0].w_stash_bytes);
  EXPECT_DOUBLE_EQ(TransformerModelFlopsPerToken(*s.model.transformer),
                   TransformerModelFlopsPerToken(*TinyMoe().model.transformer));
  // DeepEP's one copy of a token is the bytes over the top_k copies sent, so it carries the
  // busiest device's load too: 192 / 2 = 96 bytes, 1.5 x the even 128 / 2.
  EXPECT_DOUBLE_EQ(t.a2a_routing.copies, 2);
  EXPECT_DOUBLE_EQ(static_cast<double>(t.stages[0].a2a_bytes) / t.a2a_routing.copies, 96);
  EXPECT_DOUBLE_EQ(static_cast<double>(even.stages[0].a2a_bytes) / even.a2a_routing.copies, 64);
  GptKernelShape g;  // the roofline's list: each local expert's GEMMs get 1.5 x its 4 rows
  g.microbatch = 1, g.seq = 4, g.hidden = 8, g.heads = 2, g.vocab = 10;
  g.experts = 4, g.routed = 2 * 1.5, g.local_experts = 2, g.expert_ffn = 6;
  for (const Kernel& k : GptBlockKernels(g, true)) {
    if (k.name == "expert.fc") EXPECT_EQ(k.m, 6);
  }
}

// The kernel list of a MoE layer: its GEMMs add up to the same FLOPs as the analytical model's
// (router 256, experts 1536 in two grouped GEMMs of the two local experts, each its 4 of the 8
// routed rows), and its memory kernels are the router's top-k, the permutation and its inverse.
TEST(Moe, KernelListFlops) {
  GptKernelShape g;
  g.microbatch = 1, g.seq = 4, g.hidden = 8, g.heads = 2, g.vocab = 10;
  g.experts = 4, g.routed = 2, g.local_experts = 2, g.expert_ffn = 6;
  double forward = 0;
  std::vector<std::string> memory;
  for (const Kernel& k : GptBlockKernels(g, true)) {
    if (k.pass != KernelPass::kF) continue;
    if (k.kind == KernelClass::kMemory) memory.push_back(k.name);
    if (k.kind == KernelClass::kGemm || k.kind == KernelClass::kBatchedGemm) forward += k.flops;
    if (k.name == "expert.fc") {
      EXPECT_EQ(k.batch, 2);
      EXPECT_EQ(k.m, 4);
    }
  }
  EXPECT_DOUBLE_EQ(forward, 4352);
  for (const char* name : {"router.topk", "permute", "unpermute", "expert.bias_gelu"}) {
    EXPECT_NE(std::find(memory.begin(), memory.end(), name), memory.end()) << name;
  }
}

// Megatron's all-to-all dispatcher sorts the chunks it received by local expert after the
// dispatch and back before the combine (sort_chunks_by_idxs), with its backward: 4 x 2 routed
// rows of h = 8 in 16 bits, read and written, each. DeepEP's dispatch, or one local expert,
// needs no such pass.
TEST(Moe, AllToAllDispatcherSortsChunksByLocalExpert) {
  GptKernelShape g;
  g.microbatch = 1, g.seq = 4, g.hidden = 8, g.heads = 2, g.vocab = 10;
  g.experts = 4, g.routed = 2, g.local_experts = 2, g.expert_ffn = 6;
  const auto sorts = [](const GptKernelShape& shape) {
    std::vector<std::string> names;
    for (const Kernel& k : GptBlockKernels(shape, true)) {
      if (k.name.find("sort_chunks") == std::string::npos) continue;
      names.push_back(k.name);
      EXPECT_DOUBLE_EQ(k.bytes, 4 * 2 * 8 * 2 * 2.0) << k.name;
    }
    return names;
  };
  EXPECT_EQ(sorts(g),
            (std::vector<std::string>{"sort_chunks", "unsort_chunks", "unsort_chunks.dX", "sort_chunks.dX"}));
  GptKernelShape deepep = g;
  deepep.deepep = true;
  EXPECT_TRUE(sorts(deepep).empty());
  GptKernelShape one = g;
  one.local_experts = 1;
  EXPECT_TRUE(sorts(one).empty());
}

// The all-to-all's flows over 2 nodes of 2 devices, E = 4, 4 MB per device: each device keeps
// 1 MB, sends 1 MB to its node's other device and 2 MB across (1 MB to each device there). Per
// link, what the flows carry is what the twelve pairs would.
TEST(Moe, AllToAllFlowsLoadLinksAsEveryPair) {
  const Topology topo = testing::Node(2, 100e9, 1000, 2, 10e9, 5000);
  const int64_t bytes = 4'000'000;
  const CollectivePlan plan = PlanAllToAll(topo, {0, 1, 2, 3}, bytes, 3);
  ASSERT_EQ(plan.phases.size(), 1u);
  EXPECT_EQ(plan.phases[0].steps, 3);
  EXPECT_EQ(plan.phases[0].route_latency_ns, 5000);
  std::map<int, double> by_flows, by_pairs;
  for (const CollectiveFlow& f : plan.phases[0].flows) {
    for (const int link : topo.Route(f.src_device, f.dst_device)) by_flows[link] += static_cast<double>(f.bytes);
  }
  for (int src = 0; src < 4; ++src) {
    for (int dst = 0; dst < 4; ++dst) {
      if (src == dst) continue;
      for (const int link : topo.Route(src, dst)) by_pairs[link] += 3.0 * bytes / 4;
    }
  }
  EXPECT_EQ(by_flows, by_pairs);
  // Alone: 3 latencies, then the cluster links' 3 x 2 MB at 10 GB/s.
  EXPECT_NEAR(PlanAloneNs(topo, plan), 3 * 5000 + 6e6 / 10e9 * 1e9, 1);
  EXPECT_TRUE(PlanAllToAll(topo, {0}, bytes, 3).phases.empty());
}

// DeepEP's routing on the same 2 x 2 devices, 8 experts (2 a device), top-2, 4 MB of routed
// copies a device (2 MB a copy of its tokens): a token misses a device's 2 experts with chance
// (6/8)(5/7) = 30/56 and a node's 4 with (4/8)(3/7) = 12/56. Over the NIC each device sends one
// copy per other node hit, 2 MB x 44/56; over NVLink one per GPU hit in its node and as many
// forwarded for the other node, 2 MB x 26/56 x 2 nodes. Megatron-LM's all-to-all sends 2 MB and
// 1 MB of its copies.
TEST(Moe, DeepEpSendsACopyPerNodeAndPerGpu) {
  const Topology topo = testing::Node(2, 100e9, 1000, 2, 10e9, 5000);
  const AllToAllRouting deepep{.dedup = true, .experts = 8, .top_k = 2, .copies = 2};
  const CollectivePlan plan = PlanAllToAll(topo, {0, 1, 2, 3}, 4'000'000, 1, deepep);
  ASSERT_EQ(plan.phases.size(), 1u);
  std::map<std::pair<int, int>, int64_t> flows;
  for (const CollectiveFlow& f : plan.phases[0].flows) flows[{f.src_device, f.dst_device}] = f.bytes;
  EXPECT_EQ(flows.at({0, 2}), std::llround(2e6 * 44 / 56));
  EXPECT_EQ(flows.at({0, 1}), std::llround(2e6 * 26 / 56 * 2));
  const CollectivePlan plain = PlanAllToAll(topo, {0, 1, 2, 3}, 4'000'000, 1);
  for (const CollectiveFlow& f : plain.phases[0].flows) {
    EXPECT_EQ(f.bytes, topo.NodeOf(f.src_device) == topo.NodeOf(f.dst_device) ? 1'000'000 : 2'000'000);
  }
}

// Node-limited routing on 4 nodes of 2 devices, 16 experts (2 a device, 4 a node), top-2, at most
// 2 nodes a token: a node is among its 2 with chance 2/4, and then holds one of its experts with
// chance 1 - C(4, 2)/C(8, 2) = 22/28 (its top-2 among the 8 experts of its 2 nodes): 11/28 a node,
// so each device sends 3 x 11/28 of a copy (2 MB) over its NIC, against 3 x (1 - C(12, 2)/C(16, 2))
// = 3 x 54/120 unlimited; a GPU of its node 2/4 x (1 - C(6, 2)/C(8, 2)) = 13/56, forwarded for each
// of the 4 nodes.
TEST(Moe, NodeLimitedRoutingSendsFewerCopiesOverTheNics) {
  const Topology topo = testing::Node(2, 100e9, 1000, 4, 10e9, 5000);
  const std::vector<int> group = {0, 1, 2, 3, 4, 5, 6, 7};
  const auto flows_of = [&](int limit) {
    const AllToAllRouting deepep{.dedup = true, .experts = 16, .top_k = 2, .copies = 2, .node_limit = limit};
    const CollectivePlan plan = PlanAllToAll(topo, group, 4'000'000, 1, deepep);
    std::map<std::pair<int, int>, int64_t> flows;
    for (const CollectiveFlow& f : plan.phases.at(0).flows) flows[{f.src_device, f.dst_device}] = f.bytes;
    return flows;
  };
  const auto limited = flows_of(2), unlimited = flows_of(0);
  EXPECT_EQ(limited.at({0, 2}), std::llround(2e6 * 3 * 11 / 28));
  EXPECT_EQ(limited.at({0, 1}), std::llround(2e6 * 13 / 56 * 4));
  EXPECT_EQ(unlimited.at({0, 2}), std::llround(2e6 * 3 * 54 / 120));
  EXPECT_EQ(flows_of(4), unlimited);  // a limit of every node is none
}

// The limit must leave a token its top_k: 1 node of 4 experts cannot hold a top-8.
TEST(Moe, ANodeLimitBelowTheTopKIsRefused) {
  const testing::ScratchDir dir;
  const std::string base = R"(name: t
topology: {device: {name: d, peak: 1TFLOPS, memory: 80GiB}, nodes: 4, devices_per_node: 2,
           links: [{scope: node, bandwidth: 100GB/s, latency: 1us}, {scope: cluster, bandwidth: 10GB/s, latency: 1us}]}
model:
  transformer: {layers: 4, hidden: 64, heads: 4, seq: 16, vocab: 100, moe: {experts: 16, top_k: 8, node_limit: 2}}
pipeline: {schedule: 1f1b, ranks: 1, microbatches: 4, data_parallel: 8, expert_parallel: 8, moe_dispatcher: deepep}
)";
  EXPECT_EQ(testing::LoadError(dir, base), "");
  EXPECT_NE(testing::LoadError(dir, testing::Replace(base, "node_limit: 2", "node_limit: 1"))
                .find("model.transformer.moe.node_limit: 1 nodes of the expert group's 4 hold 1 x 4 experts, fewer "
                      "than top_k 8: expected at least 2, got 1"),
            std::string::npos);
}

// 1F1B on 2 ranks, 2 microbatches: an ALL_TO_ALL after every F and B of the marked stages,
// before the SEND of its op's output; Validate accepts it and refuses one moved or repeated.
TEST(Moe, AllToAllsArePlacedAfterTheirOpsAndValidated) {
  const schedules::Schedule s = schedules::PlaceAllToAlls(testing::Make("1f1b", 2, 2), {true, false});
  EXPECT_TRUE(schedules::Validate(s).empty());
  const std::vector<Op>& rank0 = s.ops[0];
  int a2a = 0;
  for (size_t i = 0; i < rank0.size(); ++i) {
    if (!schedules::IsAllToAll(rank0[i].kind)) continue;
    ++a2a;
    EXPECT_EQ(rank0[i - 1], (Op{rank0[i].tensor == Tensor::kActivations ? OpKind::kF : OpKind::kB, 0,
                               rank0[i].microbatch, 0, rank0[i - 1].version}));
  }
  EXPECT_EQ(a2a, 4);
  for (const Op& op : s.ops[1]) EXPECT_FALSE(schedules::IsAllToAll(op.kind));
  EXPECT_EQ(schedules::ActionString(schedules::AllToAllOf(rank0[0]), 2), "0ALL_TO_ALL_ACT0");
  // Placing again keeps the one set; an ALL_TO_ALL before its op, or twice, is refused.
  EXPECT_EQ(schedules::PlaceAllToAlls(s, {true, false}), s);
  schedules::Schedule moved = s;
  std::swap(moved.ops[0][0], moved.ops[0][1]);
  const auto diags = schedules::Validate(moved);
  ASSERT_FALSE(diags.empty());
  EXPECT_NE(schedules::SummarizeDiagnostics(diags).find("ALL_TO_ALL comes right after"), std::string::npos);
  schedules::Schedule twice = s;
  twice.ops[0].insert(twice.ops[0].begin() + 2, twice.ops[0][1]);
  EXPECT_NE(schedules::SummarizeDiagnostics(schedules::Validate(twice)).find("a second ALL_TO_ALL"),
            std::string::npos);
}

// DualPipe-V's overlapped F&B pairs, and those of Megatron-LM's combined 1F1B
// (interleaved-overlap): both ALL_TO_ALLs after the pair, posted by its first op.
TEST(Moe, AnOverlappedPairsAllToAllsFollowThePair) {
  for (const char* name : {"dualpipe-v", "interleaved-overlap"}) {
    const schedules::Schedule s = schedules::PlaceAllToAlls(testing::Make(name, 2, 4, 1, 2), {true, true, true, true});
    EXPECT_TRUE(schedules::Validate(s).empty()) << name;
    int pairs = 0;
    for (int r = 0; r < 2; ++r) {
      const std::vector<Op>& ops = s.ops[r];
      const std::vector<int> posted_by = schedules::PairedAllToAlls(s, r);
      for (size_t i = 0; i + 3 < ops.size(); ++i) {
        if (!(schedules::IsForward(ops[i].kind) && ops[i + 1].overlapped)) continue;
        ++pairs;
        EXPECT_EQ(ops[i + 2], schedules::AllToAllOf(ops[i])) << name;
        EXPECT_EQ(ops[i + 3], schedules::AllToAllOf(ops[i + 1])) << name;
        EXPECT_EQ(posted_by[i + 2], static_cast<int>(i)) << name;
        EXPECT_EQ(posted_by[i + 3], static_cast<int>(i)) << name;
      }
    }
    // interleaved-overlap at p = 2, v = 2, m = 4: 3 pairs on rank 0 and 5 on rank 1 (generators_test).
    if (std::string(name) == "interleaved-overlap") EXPECT_EQ(pairs, 8);
    EXPECT_GT(pairs, 0) << name;
  }
}

// One stage on one rank (GPipe, 1 microbatch), its expert group devices 0 and 1 on a node of
// 1 GB/s links and 2 us: F [0, 1 ms]; its ALL_TO_ALL (two all-to-alls of 2 MB a device, half of
// each to the other device: 2 MB at 1 GB/s = 2 ms, + 2 latencies) [1 ms, 3.004 ms]; B starts when
// it ends, then its own ALL_TO_ALL before the STEP. The bubble split calls both waits collective.
TEST(Moe, AnAllToAllInARunIsTimedByHand) {
  const schedules::Schedule s = schedules::PlaceAllToAlls(testing::Make("gpipe", 1, 1), {true});
  CostTable costs = testing::Uniform(1, kMs, kMs, kMs);
  costs.stages[0].a2a_forward = costs.stages[0].a2a_backward = 2;
  costs.stages[0].a2a_bytes = 2'000'000;
  SimConfig config;
  config.expert_devices = {{0, 1}};
  const RunRecord r = Simulate(s, costs, testing::Node(2, 1e9, 2000), config);
  std::vector<std::pair<int64_t, int64_t>> a2a;
  int64_t b_start = -1;
  for (size_t i = 0; i < s.ops[0].size(); ++i) {
    if (schedules::IsAllToAll(s.ops[0][i].kind)) a2a.emplace_back(r.ranks[0].ops[i].start_ns, r.ranks[0].ops[i].end_ns);
    if (s.ops[0][i].kind == OpKind::kB) b_start = r.ranks[0].ops[i].start_ns;
  }
  const int64_t a2a_ns = 2 * 2000 + 2 * kMs;
  ASSERT_EQ(a2a.size(), 2u);
  EXPECT_EQ(a2a[0], (std::pair{kMs, kMs + a2a_ns}));
  EXPECT_EQ(b_start, kMs + a2a_ns);
  EXPECT_EQ(a2a[1].first, b_start + 2 * kMs);
  EXPECT_EQ(r.makespan_ns(), 3 * kMs + 2 * a2a_ns);
  const auto split = schedules::SplitBubbles(s, r, false);
  EXPECT_EQ(split[0].collective_ns, 2 * a2a_ns);  // before B, and before the STEP
}

// DualPipe's overlap, by hand on one rank: F0, then the pair (F1; B0), then B1, each op with its
// ALL_TO_ALL (1 ms alone: 1 MB to the other device of the expert group at 1 GB/s). Waiting for
// each (a2a_overlap off): F0 [0, 1], its all-to-all [1, 2], F1 [2, 3], B0 [3, 5], the pair's two
// [5, 7], B1 [7, 9], its own [9, 10]: 10 ms. Overlapped: the pair's two start with F1 at 2 and
// run [2, 3] and [3, 4] beside F1 [2, 3] and B0 [3, 5]: B1 [5, 7], its all-to-all [7, 8]: 8 ms.
// Giving half the device to them (sm_share 0.5) stretches F1 and B0 to [2, 4] and [4, 8]: 11 ms.
TEST(Moe, AnOverlappedPairRunsItsAllToAllsBesideItsComputeByHand) {
  schedules::Schedule s;
  s.name = "pair";
  s.shape = schedules::Shape{1, 1, schedules::Placement::kLoop};
  s.microbatches = 2;
  s.lowered = true;
  Op b0{OpKind::kB, 0, 0, 0, 0};
  b0.overlapped = true;
  s.ops = {{Op{OpKind::kF, 0, 0, 0, 0}, Op{OpKind::kF, 0, 1, 0, 0}, b0, Op{OpKind::kB, 0, 1, 0, 0},
            Op{OpKind::kStep, 0, 0, 0, 1}}};
  s = schedules::PlaceAllToAlls(s, {true});
  ASSERT_TRUE(schedules::Validate(s).empty()) << schedules::SummarizeDiagnostics(schedules::Validate(s));
  CostTable costs = testing::Uniform(1, kMs, kMs, kMs);
  costs.stages[0].a2a_forward = costs.stages[0].a2a_backward = 1;
  costs.stages[0].a2a_bytes = 2'000'000;
  SimConfig config;
  config.expert_devices = {{0, 1}};
  const auto makespan = [&](bool overlap, double share) {
    CostTable c = costs;
    c.a2a_overlap = overlap;
    c.a2a_sm_share = share;
    return Simulate(s, c, testing::Node(2, 1e9, 0), config).makespan_ns();
  };
  EXPECT_EQ(makespan(false, 0), 10 * kMs);
  EXPECT_EQ(makespan(true, 0), 8 * kMs);
  EXPECT_EQ(makespan(true, 0.5), 11 * kMs);
  EXPECT_EQ(makespan(false, 0.5), 10 * kMs);  // the share is given up only while a pair overlaps
}

// DeepEP sends a token once to each node of its expert group and forwards it there: an expert
// group of 6 on nodes of 4 (4 + 2) is refused at pipeline.moe_dispatcher; 4 + 4 is taken.
TEST(Moe, DeepEpNeedsTheExpertGroupEvenOverItsNodes) {
  const testing::ScratchDir dir;
  const std::string base = R"(name: t
topology: {device: {name: d, peak: 1TFLOPS, memory: 80GiB}, nodes: 2, devices_per_node: 4,
           links: [{scope: node, bandwidth: 100GB/s, latency: 1us}, {scope: cluster, bandwidth: 10GB/s, latency: 1us}]}
model:
  transformer: {layers: 4, hidden: 64, heads: 4, seq: 16, vocab: 100, moe: {experts: 24, top_k: 2}}
pipeline: {schedule: 1f1b, ranks: 1, microbatches: 4, data_parallel: 6, expert_parallel: 6, moe_dispatcher: deepep}
)";
  EXPECT_NE(testing::LoadError(dir, base).find("pipeline.moe_dispatcher: deepep forwards the tokens a node receives to "
                                               "its experts over NVLink: it needs each expert group's 6 devices spread "
                                               "evenly over their nodes, got 4 + 2 on 2 nodes"),
            std::string::npos);
  EXPECT_EQ(testing::LoadError(dir, testing::Replace(testing::Replace(base, "data_parallel: 6", "data_parallel: 8"),
                                                     "expert_parallel: 6", "expert_parallel: 8")),
            "");
  EXPECT_EQ(testing::LoadError(dir, testing::Replace(base, ", moe_dispatcher: deepep", "")), "");
}

// Bad input, one line at its key: E without experts, E not dividing the experts or D x T, T > 1
// without sequence parallelism, a top_k beyond the experts, dropless with a capacity.
TEST(Moe, BadLayoutsAreRefusedAtTheirKeys) {
  const testing::ScratchDir dir;
  const std::string base = R"(name: t
topology: {device: {name: d, peak: 1TFLOPS, memory: 80GiB}, devices_per_node: 16,
           links: [{scope: node, bandwidth: 100GB/s, latency: 1us}]}
model:
  transformer: {layers: 4, hidden: 64, heads: 4, seq: 16, vocab: 100, moe: {experts: 8, top_k: 2}}
pipeline: {schedule: 1f1b, ranks: 2, microbatches: 4, data_parallel: 4, expert_parallel: 4}
)";
  EXPECT_EQ(testing::LoadError(dir, base), "");
  EXPECT_NE(testing::LoadError(dir, testing::Replace(base, "expert_parallel: 4", "expert_parallel: 3"))
                .find("pipeline.expert_parallel: must divide model.transformer.moe.experts (8)"),
            std::string::npos);
  EXPECT_NE(testing::LoadError(dir, testing::Replace(base, "expert_parallel: 4", "expert_parallel: 8"))
                .find("must divide data_parallel x tensor_parallel (4 x 1 = 4)"),
            std::string::npos);
  // With context parallelism each factor is named with its own number.
  EXPECT_NE(testing::LoadError(dir, testing::Replace(base, "data_parallel: 4, expert_parallel: 4",
                                                     "data_parallel: 1, context_parallel: 2, expert_parallel: 8"))
                .find("must divide data_parallel x context_parallel x tensor_parallel (1 x 2 x 1 = 2)"),
            std::string::npos);
  EXPECT_NE(testing::LoadError(dir, testing::Replace(base, ", moe: {experts: 8, top_k: 2}", ""))
                .find("pipeline.expert_parallel: shards the experts"),
            std::string::npos);
  EXPECT_NE(testing::LoadError(dir, testing::Replace(base, "data_parallel: 4,", "data_parallel: 2, tensor_parallel: 2,"))
                .find("pipeline.sequence_parallel: must be true"),
            std::string::npos);
  EXPECT_NE(testing::LoadError(dir, testing::Replace(base, "top_k: 2", "top_k: 9")).find("moe.top_k"), std::string::npos);
  EXPECT_NE(testing::LoadError(dir, testing::Replace(base, "top_k: 2", "top_k: 2, capacity_factor: 1.25, dropless: true"))
                .find("either dropless: true or a capacity_factor"),
            std::string::npos);
  const std::string padded = testing::Replace(base, "top_k: 2", "top_k: 2, capacity_factor: 1.25, load_imbalance: 1.2");
  EXPECT_NE(testing::LoadError(dir, padded).find("moe.load_imbalance: expected none with a capacity_factor"),
            std::string::npos);
  EXPECT_NE(testing::LoadError(dir, testing::Replace(base, "top_k: 2", "top_k: 2, load_imbalance: 0.8"))
                .find("moe.load_imbalance: expected a number in [1, 1024] (the busiest device's rows over its even "
                      "share; 1: balanced), got 0.8"),
            std::string::npos);
  // At most E x min(top_k, experts / E) / top_k: 4 x 2 / 2 = 4 here.
  EXPECT_EQ(testing::LoadError(dir, testing::Replace(base, "top_k: 2", "top_k: 2, load_imbalance: 4")), "");
  EXPECT_NE(testing::LoadError(dir, testing::Replace(base, "top_k: 2", "top_k: 2, load_imbalance: 5"))
                .find("model.transformer.moe.load_imbalance: expected at most 4 with pipeline.expert_parallel 4: the "
                      "busiest device gets at most 2 of each token's 2 routed copies from each of the 4 devices, got 5"),
            std::string::npos);
  const std::string unsharded = testing::Replace(base, ", expert_parallel: 4", "");
  EXPECT_NE(testing::LoadError(dir, testing::Replace(unsharded, "top_k: 2", "top_k: 2, load_imbalance: 1.2"))
                .find("model.transformer.moe.load_imbalance: needs pipeline.expert_parallel > 1"),
            std::string::npos);
}

}  // namespace
}  // namespace stagecraft::sim
