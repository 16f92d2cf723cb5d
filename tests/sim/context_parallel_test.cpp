// Context parallelism (pipeline.context_parallel: C): each sequence split over C devices, worked
// by hand. A device runs s / C of each sequence's tokens, whose attention still scores the whole
// sequence's keys (load-balanced: s / 2 a query on average), so its FLOPs are 1/C of the whole
// sequence's and more than a sequence of s / C would cost by exactly the attention's missing keys;
// its activations are 1/C (Korthikanti's terms are linear in s without stored scores); the weights
// are whole on each of the C devices, whose gradients and ZeRO shards span the D x C replicas; the
// devices are numbered tensor, context, data, pipeline (Megatron's order); the ring of key-value
// exchanges is hidden behind the attention up to (C - 1) / C of its time; bad values one line.
#include <gtest/gtest.h>

#include <cmath>
#include <algorithm>
#include <map>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "sim_test_util.h"
#include "stagecraft/schedules/generators.h"
#include "stagecraft/sim/cost_models.h"
#include "stagecraft/sim/gpt_kernels.h"
#include "stagecraft/sim/roofline.h"

namespace stagecraft::sim {
namespace {

using testing::ErrorOf;
using testing::Replace;

// 4 layers of 1024 (16 heads of 64) at seq 4096 with flash attention, on one node of 8 devices
// at 100 GB/s; the analytical model at 100 TFLOP/s x 0.5.
constexpr const char* kYaml = R"(name: cp
topology:
  device: {name: gpu, peak: 100TFLOPS, memory: 80GiB, efficiency: 0.5}
  nodes: 1
  devices_per_node: 8
  links: [{scope: node, bandwidth: 100GB/s, latency: 0us}, {scope: cluster, bandwidth: 50GB/s, latency: 0us}]
model:
  transformer: {layers: 4, hidden: 1024, heads: 16, seq: 4096, vocab: 32000, attention: flash, dtype: bf16}
pipeline: {schedule: 1f1b, ranks: 2, microbatches: 4}
training: {optimizer: adam, lr: 0.0001, dtype: bf16}
)";

Scenario Load(std::vector<std::string> sets) { return LoadScenarioFromText(kYaml, "cp.yaml", std::move(sets)); }

TEST(ContextParallel, EachDeviceRunsItsShareOfTheTokensAgainstEveryKey) {
  const CostTable one = BuildCosts(Load({}), 2);
  const CostTable cp = BuildCosts(Load({"pipeline.context_parallel=2"}), 2);
  // The alternative that cuts the sequence: half as long, twice the replicas.
  const CostTable cut = BuildCosts(Load({"model.transformer.seq=2048", "pipeline.data_parallel=2"}), 2);
  // Per stage (2 layers): the attention's missing keys on a half-length sequence, 2048 tokens x
  // 2 layers x 2 (multiply-add) x (2048 - 1024 keys) x (q + o = 2048) FLOPs, at 50 TFLOP/s.
  const double missing_ns = 2048.0 * 2 * 2 * 1024 * 2048 / 50e12 * 1e9;
  for (int st = 0; st < 2; ++st) {
    SCOPED_TRACE(st);
    const StageCost &a = one.stages[st], &c = cp.stages[st], &h = cut.stages[st];
    EXPECT_NEAR(static_cast<double>(c.forward_ns), a.forward_ns / 2.0, 1);
    EXPECT_NEAR(static_cast<double>(c.backward_input_ns), a.backward_input_ns / 2.0, 1);
    EXPECT_NEAR(static_cast<double>(c.backward_weight_ns), a.backward_weight_ns / 2.0, 1);
    EXPECT_NEAR(static_cast<double>(c.forward_ns - h.forward_ns), missing_ns, 2);
    EXPECT_NEAR(static_cast<double>(c.activation_bytes), a.activation_bytes / 2.0, 1);
    EXPECT_NEAR(static_cast<double>(c.send_bytes), a.send_bytes / 2.0, 1);
    EXPECT_EQ(c.weight_bytes, a.weight_bytes);  // the position table is the whole sequence's
    EXPECT_EQ(c.optimizer_bytes, a.optimizer_bytes);
  }
  // The analytical model's exchanges: on a link of 0.1 bytes a ns the all-gather of the keys and
  // values (4096 x 2 x 16 heads x 64 x 2 bytes) is one pass, half of them through each link, a
  // layer in F and two in I, none hidden; the ring hides behind the attention on the fast link.
  const CostTable gather = BuildCosts(LoadScenarioFromText(Replace(kYaml, "100GB/s", "0.1GB/s"), "cp.yaml",
                                                           {"pipeline.context_parallel=2",
                                                            "pipeline.context_parallel_comm=all_gather"}),
                                      2);
  const double pass = 4096.0 * 2 * 16 * 64 * 2 / 2 / 0.1;
  EXPECT_NEAR(static_cast<double>(gather.stages[1].forward_ns), one.stages[1].forward_ns / 2.0 + 2 * pass, 2);
  EXPECT_NEAR(static_cast<double>(gather.stages[1].backward_input_ns),
              one.stages[1].backward_input_ns / 2.0 + 2 * 2 * pass, 2);
  // ZeRO-1 over the D x C = 2 replicas: half the optimizer state, though D = 1.
  const CostTable zero = BuildCosts(Load({"pipeline.context_parallel=2", "pipeline.zero=1"}), 2);
  EXPECT_NEAR(static_cast<double>(zero.stages[1].optimizer_bytes), one.stages[1].optimizer_bytes / 2.0, 1);
}

TEST(ContextParallel, DevicesAreNumberedTensorContextDataPipeline) {
  const Scenario sc = LoadScenarioFromText(
      Replace(kYaml, "nodes: 1", "nodes: 2"), "cp.yaml",
      {"pipeline.tensor_parallel=2", "pipeline.context_parallel=2", "pipeline.data_parallel=2"});
  const ParallelLayout& p = sc.pipeline;
  EXPECT_EQ(p.world(), 16);
  EXPECT_EQ(p.replicas(), 4);
  EXPECT_EQ(p.ContextDevices(), (std::vector<std::vector<int>>{{0, 2}, {8, 10}}));
  EXPECT_EQ(p.ReplicaDevices(), (std::vector<std::vector<int>>{{0, 2, 4, 6}, {8, 10, 12, 14}}));
  EXPECT_EQ(p.DeviceOf(1, 3, 1), 15);
  // The schedule's replicas, whose REDUCE_GRAD each STEP waits for, are the D x C.
  const auto* info = schedules::FindGenerator("1f1b");
  ASSERT_NE(info, nullptr);
  EXPECT_EQ(GeneratorParamsFor(sc.pipeline, *info).data_parallel, 4);
  // Without data parallelism the context group still reduces its gradients.
  const Scenario alone = Load({"pipeline.context_parallel=2"});
  EXPECT_EQ(GeneratorParamsFor(alone.pipeline, *info).data_parallel, 2);
  EXPECT_EQ(alone.pipeline.ReplicaDevices(), (std::vector<std::vector<int>>{{0, 1}, {2, 3}}));
  // The experts fold over the D x C x T devices: E = 2 with D = T = 1 and C = 2.
  const std::string moe = Replace(kYaml, "attention: flash,", "attention: flash, moe: {experts: 4, top_k: 2},");
  EXPECT_EQ(ErrorOf([&] {
              LoadScenarioFromText(moe, "cp.yaml", {"pipeline.context_parallel=2", "pipeline.expert_parallel=2"});
            }),
            "");
}

std::map<std::string, TimedKernel> Timed(const Scenario& sc) {
  std::map<std::string, TimedKernel> out;
  for (const TimedKernel& k : TimeKernels(sc, 0, sc.topology.device, GptBlockKernels(KernelShapeOf(sc)))) {
    out.emplace(k.kernel.name, k);
  }
  return out;
}

// On the device library's H100: the flash kernel's FLOPs are 1/C of the whole sequence's; the ring
// passes the whole sequence's keys and values (F) and them and their gradients (I) on this
// device's heads; on a slow link only what its C - 1 steps outlast of the attention is left.
TEST(ContextParallel, TheRingRunsBesideTheAttention) {
  const std::string yaml = Replace(Replace(kYaml, "device: {name: gpu, peak: 100TFLOPS, memory: 80GiB, efficiency: 0.5}",
                                           "device: H100-SXM"),
                                   "heads: 16,", "heads: 16, kv_heads: 4,");
  const Scenario one = LoadScenarioFromText(yaml, "cp.yaml", {});
  const auto whole = Timed(one);
  EXPECT_EQ(whole.count("cp_ring"), 0U);
  for (const int c : {2, 4}) {
    SCOPED_TRACE(c);
    for (const std::string bandwidth : {"100GB/s", "0.1GB/s"}) {
      SCOPED_TRACE(bandwidth);
      const Scenario sc = LoadScenarioFromText(Replace(yaml, "100GB/s", bandwidth), "cp.yaml",
                                               {"pipeline.context_parallel=" + std::to_string(c)});
      const auto k = Timed(sc);
      EXPECT_NEAR(k.at("flash_attention").kernel.flops, whole.at("flash_attention").kernel.flops / c, 1);
      EXPECT_NEAR(k.at("flash_attention.dX").kernel.flops, whole.at("flash_attention.dX").kernel.flops / c, 1);
      // 4096 keys x 4 kv heads x 64 x (K and V) x 2 bytes.
      const double bytes = 4096.0 * 4 * 64 * 2 * 2;
      EXPECT_DOUBLE_EQ(k.at("cp_ring").kernel.bytes, bytes);
      EXPECT_DOUBLE_EQ(k.at("cp_ring.dX").kernel.bytes, 2 * bytes);
      const double rate = bandwidth == "100GB/s" ? 100.0 : 0.1;  // bytes a ns
      for (const auto& [ring, attention, b] : {std::tuple{"cp_ring", "flash_attention", bytes},
                                               std::tuple{"cp_ring.dX", "flash_attention.dX", 2 * bytes}}) {
        // C - 1 steps, each one device's chunk (b / C) at the link's rate.
        const double steps = (c - 1) * (b / c) / rate;
        const double hidden = k.at(attention).time.ns() * (c - 1) / c;
        EXPECT_NEAR(k.at(ring).time.link_ns, std::max(0.0, steps - hidden), 1e-6 * steps) << ring;
      }
    }
  }
  // The slow link leaves some exposed; the fast one none.
  const Scenario slow = LoadScenarioFromText(Replace(yaml, "100GB/s", "0.1GB/s"), "cp.yaml",
                                             {"pipeline.context_parallel=2"});
  EXPECT_GT(Timed(slow).at("cp_ring").time.link_ns, 0);
  // The Llama 3 paper's all-gather in place of the ring: the keys and values gathered before the
  // attention (one pass, (C - 1) / C of them through each device's link), in I gathered again and
  // their gradients reduce-scattered; none of it hidden.
  const Scenario gather = LoadScenarioFromText(Replace(yaml, "100GB/s", "0.1GB/s"), "cp.yaml",
                                               {"pipeline.context_parallel=4", "pipeline.context_parallel_comm=all_gather"});
  const auto g = Timed(gather);
  EXPECT_EQ(g.count("cp_ring"), 0U);
  EXPECT_EQ(g.count("cp_ring.dX"), 0U);
  const double bytes = 4096.0 * 4 * 64 * 2 * 2, pass = 3 * (bytes / 4) / 0.1;  // ns at 0.1 bytes a ns
  for (const char* name : {"cp_all_gather", "cp_all_gather.dX", "cp_reduce_scatter.dX"}) {
    ASSERT_EQ(g.count(name), 1U) << name;
    EXPECT_DOUBLE_EQ(g.at(name).kernel.bytes, bytes) << name;
    EXPECT_NEAR(g.at(name).time.link_ns, pass, 1e-9 * pass) << name;
  }
  EXPECT_EQ(g.at("cp_all_gather").kernel.pass, KernelPass::kF);
  EXPECT_EQ(g.at("cp_reduce_scatter.dX").kernel.pass, KernelPass::kI);
  EXPECT_NE(ErrorOf([&] {
              LoadScenarioFromText(yaml, "cp.yaml", {"pipeline.context_parallel=2", "pipeline.context_parallel_comm=a2a"});
            }).find("pipeline.context_parallel_comm"),
            std::string::npos);
}

// The analytical model's ring with sliding windows: a windowed layer's attention sees only its
// window's keys, so it hides less of the ring. Each stage of 2 layers (full_every 2) has one
// windowed layer of 256 and one attending to its whole past; at 100 GB/s the ring's pass is
// 16,777,216 bytes / 2 per link = 83,886 ns in F (twice the bytes in I), which the whole
// layer's attention hides (2048 queries x 2 x 2048 keys x 2048 (q + o) FLOPs = 343.6 us at
// 50 TFLOP/s, half of it beside the one step) and the windowed one's (248 keys) does not; at
// 100 TB/s both hide it.
TEST(ContextParallel, AWindowedLayersAttentionHidesLessOfTheRing) {
  const std::string windowed =
      Replace(kYaml, "attention: flash,", "attention: flash, sliding_window: {size: 256, full_every: 2},");
  const CostTable slow = BuildCosts(LoadScenarioFromText(windowed, "cp.yaml", {"pipeline.context_parallel=2"}), 2);
  const CostTable fast = BuildCosts(
      LoadScenarioFromText(Replace(windowed, "100GB/s", "100000GB/s"), "cp.yaml", {"pipeline.context_parallel=2"}), 2);
  const double pass = 4096.0 * 2 * 16 * 64 * 2 / 2 / 100;  // ns at 100 bytes a ns
  const double keys = 256 - 256.0 * 255 / (2 * 4096);       // a query's causal keys in a window of 256
  const double windowed_attention_ns = 2048.0 * 2 * keys * 2048 / 50e12 * 1e9;
  for (int st = 0; st < 2; ++st) {
    SCOPED_TRACE(st);
    EXPECT_NEAR(static_cast<double>(slow.stages[st].forward_ns - fast.stages[st].forward_ns),
                pass - windowed_attention_ns / 2, 2);
    EXPECT_NEAR(static_cast<double>(slow.stages[st].backward_input_ns - fast.stages[st].backward_input_ns),
                2 * pass - 2.5 * windowed_attention_ns / 2, 2);
  }
}

// While a layer's attention runs its device holds the context group's key-value buffers (the
// whole sequence's keys and values: 4096 x 2 x 16 heads x 64 x 2 bytes): the all-gather's copy in
// F, twice in the backward with its gradients; the ring's chunks of 1/C, two in F (the one in use,
// the next in flight), four in the backward.
TEST(ContextParallel, TheAttentionHoldsTheKeyValueBuffersWhileItRuns) {
  const double kv = 4096.0 * 2 * 16 * 64 * 2;
  EXPECT_EQ(BuildCosts(Load({}), 2).stages[0].BackwardWorkspace(), 0);
  for (const int c : {2, 4}) {
    SCOPED_TRACE(c);
    const std::string cp = "pipeline.context_parallel=" + std::to_string(c);
    const StageCost ring = BuildCosts(Load({cp}), 2).stages[0];
    EXPECT_NEAR(static_cast<double>(ring.workspace_bytes), 2 * kv / c, 1);
    EXPECT_NEAR(static_cast<double>(ring.BackwardWorkspace()), 4 * kv / c, 1);
    const StageCost gathered = BuildCosts(Load({cp, "pipeline.context_parallel_comm=all_gather"}), 2).stages[1];
    EXPECT_NEAR(static_cast<double>(gathered.workspace_bytes), kv, 1);
    EXPECT_NEAR(static_cast<double>(gathered.BackwardWorkspace()), 2 * kv, 1);
  }
}

TEST(ContextParallel, BadValuesAreOneLineAtTheirKey) {
  const auto error = [](const std::vector<std::string>& sets) {
    return ErrorOf([&] { LoadScenarioFromText(kYaml, "cp.yaml", sets); });
  };
  EXPECT_EQ(error({"pipeline.context_parallel=4"}), "");
  EXPECT_NE(error({"pipeline.context_parallel=2", "model.transformer.attention=unfused"})
                .find("pipeline.context_parallel: splits each sequence over devices"),
            std::string::npos);
  EXPECT_NE(error({"pipeline.context_parallel=3", "model.transformer.seq=4100"})
                .find("model.transformer.seq 4100 is not a multiple of 6"),
            std::string::npos);
  EXPECT_NE(error({"pipeline.context_parallel=8"}).find("context_parallel x tensor_parallel = 2 x 1 x 8 x 1 = 16"),
            std::string::npos);
  EXPECT_NE(error({"pipeline.context_parallel=0"}).find("pipeline.context_parallel"), std::string::npos);
  EXPECT_NE(error({"pipeline.context_parallel=two"}).find("pipeline.context_parallel"), std::string::npos);
}

}  // namespace
}  // namespace stagecraft::sim
