// Node groups (DESIGN.md §10 `topology.groups`, `topology.host`): each group of nodes its own
// device; a stage is priced on its rank's device (the slowest of them when its replicas or
// tensor ranks sit in different groups), each rank is held against its own device's memory, and
// the routes follow nodes of different sizes. A one-group topology reads exactly as the
// single-device form. Oracles: the MLP model's closed form (2·b·h² FLOPs per layer per pass at
// peak x efficiency, hand-computed here), device numbering worked by hand, the single-device
// form's own results, and the errors' texts.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "sim_test_util.h"
#include "stagecraft/schedules/generators.h"
#include "stagecraft/schedules/lower.h"
#include "stagecraft/sim/cost_models.h"
#include "stagecraft/sim/engine.h"
#include "stagecraft/sim/layer_split.h"
#include "stagecraft/sim/scenario_checks.h"
#include "stagecraft/sim/topology.h"

namespace stagecraft::sim {
namespace {

using testing::LoadError;
using testing::ScratchDir;

constexpr const char* kLinks =
    "  links: [{scope: node, bandwidth: 100GB/s, latency: 1us}, {scope: cluster, bandwidth: 10GB/s, latency: 5us}]\n";

// An MLP of 8 layers of hidden 1024 at microbatch 4 over `ranks` pipeline ranks on `topology`.
std::string MlpScenario(const std::string& topology, int ranks, const std::string& pipeline_extra = "") {
  return "name: groups\n"
         "topology:\n" + topology + kLinks +
         "model: {mlp: {layers: 8, hidden: 1024}}\n"
         "pipeline: {schedule: 1f1b, ranks: " + std::to_string(ranks) +
         ", microbatches: 4, microbatch_size: 4" + pipeline_extra + "}\n";
}

// Two groups of one node with two devices each: 1 TFLOP/s and 0.5 TFLOP/s (efficiency 1), the
// second with `slow_memory`.
std::string TwoGroups(const std::string& slow_memory = "80GiB") {
  return "  groups:\n"
         "    - {nodes: 1, devices_per_node: 2, device: {name: fast, peak: 1TFLOPS, memory: 80GiB}}\n"
         "    - {nodes: 1, devices_per_node: 2, device: {name: slow, peak: 0.5TFLOPS, memory: " + slow_memory + "}}\n";
}

// The MLP's forward per stage by hand: layers x 2·b·h² FLOPs at `flops_per_s`, to the nearest ns.
int64_t MlpForwardNs(int layers, double flops_per_s) {
  return std::llround(layers * 2.0 * 4 * 1024 * 1024 / flops_per_s * 1e9);
}

TEST(NodeGroups, DevicesAreNumberedGroupByGroupAndNodeByNode) {
  ScratchDir dir;
  const Scenario s = LoadScenario(dir.Write("s.yaml", MlpScenario(
      "  groups:\n"
      "    - {nodes: 1, devices_per_node: 4, device: {name: a, peak: 1TFLOPS, memory: 80GiB}}\n"
      "    - {nodes: 2, devices_per_node: 2, device: {name: b, peak: 2TFLOPS, memory: 40GiB}}\n", 8)));
  const TopologySpec& t = s.topology;
  ASSERT_TRUE(t.grouped());
  EXPECT_EQ(t.devices(), 8);
  EXPECT_EQ(t.node_count(), 3);
  EXPECT_EQ(t.group_count(), 2);
  const int want_node[8] = {0, 0, 0, 0, 1, 1, 2, 2};
  const char* want_device[8] = {"a", "a", "a", "a", "b", "b", "b", "b"};
  for (int d = 0; d < 8; ++d) {
    EXPECT_EQ(t.NodeOf(d), want_node[d]) << d;
    EXPECT_EQ(t.DeviceAt(d).name, want_device[d]) << d;
  }
  EXPECT_EQ(t.DevicesOnNode(0), 4);
  EXPECT_EQ(t.DevicesOnNode(2), 2);
  // The machine follows the nodes: 3 -> 4 leaves node 0 (through the cluster switch), 4 -> 5
  // stays on node 1's switch, 5 -> 6 crosses to node 2; each as the full search finds it.
  const Topology machine(t);
  EXPECT_EQ(machine.NodeOf(5), 1);
  EXPECT_EQ(machine.RouteLatencyNs(3, 4), 5000);
  EXPECT_EQ(machine.RouteLatencyNs(4, 5), 1000);
  EXPECT_EQ(machine.RouteLatencyNs(5, 6), 5000);
  for (int a = 0; a < 8; ++a) {
    for (int b = 0; b < 8; ++b) EXPECT_EQ(machine.Route(a, b), machine.RouteBySearch(a, b)) << a << " -> " << b;
  }
}

TEST(NodeGroups, EachStageIsPricedOnItsRanksDevice) {
  ScratchDir dir;
  const Scenario s = LoadScenario(dir.Write("s.yaml", MlpScenario(TwoGroups(), 4)));
  const CostTable costs = BuildCosts(s, 4);
  // Ranks 0 and 1 on the 1 TFLOP/s group, 2 and 3 on the 0.5 TFLOP/s one; two layers a stage.
  EXPECT_EQ(costs.stages[0].forward_ns, MlpForwardNs(2, 1e12));
  EXPECT_EQ(costs.stages[1].forward_ns, MlpForwardNs(2, 1e12));
  EXPECT_EQ(costs.stages[2].forward_ns, MlpForwardNs(2, 0.5e12));
  EXPECT_EQ(costs.stages[3].backward_weight_ns, MlpForwardNs(2, 0.5e12));
  // Sizes do not depend on the device.
  EXPECT_EQ(costs.stages[0].weight_bytes, costs.stages[2].weight_bytes);
  EXPECT_EQ(RankGroups(s, 0), std::vector<int>{0});
  EXPECT_EQ(RankGroups(s, 3), std::vector<int>{1});
}

TEST(NodeGroups, TheBalancedSplitGivesTheFasterGroupMoreLayers) {
  ScratchDir dir;
  // Stages 0, 1 at 1 TFLOP/s, 2, 3 at half of it: with 8 layers the most expensive stage is
  // least with [3, 3, 1, 1] (3 layers' time on the fast devices, 2 on the slow: max 3); any
  // other split puts 4 layers' time somewhere. Even split by count: [2, 2, 2, 2].
  const Scenario balanced = LoadScenario(dir.Write("b.yaml", MlpScenario(TwoGroups(), 4, ", partition: balanced")));
  EXPECT_EQ(StageLayers(balanced, 4), (std::vector<int>{3, 3, 1, 1}));
  const Scenario even = LoadScenario(dir.Write("e.yaml", MlpScenario(TwoGroups(), 4)));
  EXPECT_EQ(StageLayers(even, 4), (std::vector<int>{2, 2, 2, 2}));
  const CostTable costs = BuildCosts(balanced, 4);
  EXPECT_EQ(costs.stages[0].forward_ns, MlpForwardNs(3, 1e12));
  EXPECT_EQ(costs.stages[3].forward_ns, MlpForwardNs(1, 0.5e12));
}

TEST(NodeGroups, ARankWhoseReplicasSpanGroupsRunsAtTheSlowestsPace) {
  ScratchDir dir;
  // Pipeline innermost: rank r of replica i on device r + 2i, so each rank has a replica in
  // each group: both price on the slow device and hold the smaller memory.
  const Scenario s = LoadScenario(dir.Write("s.yaml", MlpScenario(TwoGroups("40GiB"), 2,
                                                                  ", data_parallel: 2, placement: [pipeline, data, tensor]")));
  EXPECT_EQ(RankGroups(s, 0), (std::vector<int>{0, 1}));
  const CostTable costs = BuildCosts(s, 2);
  EXPECT_EQ(costs.stages[0].forward_ns, MlpForwardNs(4, 0.5e12));
  EXPECT_EQ(costs.stages[1].forward_ns, MlpForwardNs(4, 0.5e12));
  EXPECT_EQ(RankDeviceMemories(s), (std::vector<int64_t>{int64_t{40} << 30, int64_t{40} << 30}));
}

TEST(NodeGroups, EachRankIsHeldAgainstItsOwnDevicesMemory) {
  ScratchDir dir;
  // The stages' weights alone are 2 x (1024² + 1024) x 4 bytes = 8.4 MB: the slow group's 4 MiB
  // devices cannot hold them, the fast group's 80 GiB ones can.
  const Scenario s = LoadScenario(dir.Write("s.yaml", MlpScenario(TwoGroups("4MiB"), 4)));
  EXPECT_EQ(RankDeviceMemories(s),
            (std::vector<int64_t>{int64_t{80} << 30, int64_t{80} << 30, int64_t{4} << 20, int64_t{4} << 20}));
  schedules::GeneratorParams params;
  params.ranks = 4;
  params.microbatches = 4;
  const schedules::Schedule schedule = schedules::Lower(schedules::Generate("1f1b", params));
  SimConfig config;
  config.rank_memory_bytes = RankDeviceMemories(s);
  const schedules::RunRecord run = Simulate(schedule, BuildCosts(s, schedule), Topology(s.topology), config);
  EXPECT_FALSE(run.ranks[0].oom);
  EXPECT_FALSE(run.ranks[1].oom);
  EXPECT_TRUE(run.ranks[2].oom);
  EXPECT_TRUE(run.ranks[3].oom);
  // pipeline.memory_limit, when stated, is every rank's limit for the search and zb-auto.
  const Scenario limited = LoadScenario(dir.Write("l.yaml", MlpScenario(TwoGroups("4MiB"), 4, ", memory_limit: 1GiB")));
  EXPECT_EQ(RankMemoryLimit(limited, 3), int64_t{1} << 30);
  EXPECT_EQ(RankMemoryLimit(s, 3), int64_t{4} << 20);
}

TEST(NodeGroups, OneGroupReadsAsTheSingleDeviceForm) {
  ScratchDir dir;
  const std::string pipeline = "pipeline: {schedule: 1f1b, ranks: 8, microbatches: 8, microbatch_size: 2}\n";
  const std::string model = "model: {transformer: {layers: 16, hidden: 1024, heads: 16, seq: 1024, vocab: 32000}}\n";
  const std::string links = "  links: [{scope: node, bandwidth: 450GB/s, latency: 2us}, "
                            "{scope: cluster, bandwidth: 50GB/s, latency: 5us}]\n";
  const Scenario single = LoadScenario(dir.Write("single.yaml", "name: s\ntopology:\n  device: H100-SXM\n  nodes: 2\n"
                                                                "  devices_per_node: 4\n" + links + model + pipeline));
  const Scenario grouped = LoadScenario(dir.Write("grouped.yaml", "name: s\ntopology:\n  groups: [{nodes: 2, "
                                                                  "devices_per_node: 4, device: H100-SXM}]\n" +
                                                                      links + model + pipeline));
  EXPECT_EQ(grouped.topology.DeviceAt(7).source, single.topology.device.source);  // the library file
  schedules::GeneratorParams params;
  params.ranks = 8;
  params.microbatches = 8;
  const schedules::Schedule schedule = schedules::Lower(schedules::Generate("1f1b", params));
  const CostTable a = BuildCosts(single, schedule), b = BuildCosts(grouped, schedule);
  EXPECT_EQ(a.source, "roofline");
  EXPECT_EQ(b.source, "roofline");
  for (int st = 0; st < 8; ++st) {
    EXPECT_EQ(a.stages[st].forward_ns, b.stages[st].forward_ns) << st;
    EXPECT_EQ(a.stages[st].FullBackwardNs(), b.stages[st].FullBackwardNs()) << st;
    EXPECT_EQ(a.stages[st].step_ns, b.stages[st].step_ns) << st;
  }
  SimConfig config;
  config.rank_memory_bytes = RankDeviceMemories(single);
  EXPECT_EQ(RankDeviceMemories(grouped), config.rank_memory_bytes);
  const schedules::RunRecord ra = Simulate(schedule, a, Topology(single.topology), config);
  const schedules::RunRecord rb = Simulate(schedule, b, Topology(grouped.topology), config);
  EXPECT_EQ(ra.makespan_ns(), rb.makespan_ns());
}

TEST(NodeGroups, ALibraryDeviceInAGroupIsReachedBySet) {
  ScratchDir dir;
  const std::string text = MlpScenario(
      "  groups:\n"
      "    - {nodes: 1, devices_per_node: 2, device: H100-SXM}\n"
      "    - {nodes: 1, devices_per_node: 2, device: A100-SXM-80GB}\n", 4);
  const Scenario s = LoadScenario(dir.Write("s.yaml", text), {"topology.groups.1.device.memory=40GiB"});
  EXPECT_EQ(s.topology.groups[0].device.name, "H100-SXM");
  EXPECT_EQ(s.topology.groups[1].device.name, "A100-SXM-80GB");
  EXPECT_EQ(s.topology.groups[1].device.memory_bytes, int64_t{40} << 30);
  EXPECT_EQ(s.topology.groups[0].device.memory_bytes, int64_t{80} << 30);
  EXPECT_TRUE(s.topology.groups[1].device.source.ends_with("scenarios/devices/A100-SXM-80GB.yaml"));
  // A whole device put in place by --set: read from the library too.
  const Scenario swapped = LoadScenario(dir.Write("s.yaml", text), {"topology.groups.0.device=L40S"});
  EXPECT_EQ(swapped.topology.groups[0].device.name, "L40S");
}

TEST(NodeGroups, TheHostTierIsRead) {
  ScratchDir dir;
  const Scenario s = LoadScenario(dir.Write("s.yaml", MlpScenario(
      TwoGroups() + "  host: {memory: 2TiB, bandwidth: 64GB/s, latency: 2us}\n", 4)));
  EXPECT_TRUE(s.topology.host.stated());
  EXPECT_EQ(s.topology.host.memory_bytes, int64_t{2} << 40);
  EXPECT_DOUBLE_EQ(s.topology.host.bandwidth_bytes_per_s, 64e9);
  EXPECT_EQ(s.topology.host.latency_ns, 2000);
  const Scenario none = LoadScenario(dir.Write("n.yaml", MlpScenario(TwoGroups(), 4)));
  EXPECT_FALSE(none.topology.host.stated());
  // The machine: one host link per node, shared by its devices, 64 GB/s and 2 us each way;
  // the devices' routes to each other are those of the machine without a host.
  const Topology with(s.topology), without(none.topology);
  ASSERT_TRUE(with.HostLinks(0).has_value());
  EXPECT_FALSE(without.HostLinks(0).has_value());
  EXPECT_EQ(*with.HostLinks(0), *with.HostLinks(1));  // devices 0, 1: node 0
  EXPECT_NE(*with.HostLinks(1), *with.HostLinks(2));  // device 2: node 1
  const auto [to_host, from_host] = *with.HostLinks(3);
  EXPECT_EQ(from_host, to_host + 1);
  EXPECT_DOUBLE_EQ(with.links()[static_cast<size_t>(to_host)].bandwidth_bytes_per_s, 64e9);
  EXPECT_EQ(with.links()[static_cast<size_t>(to_host)].latency_ns, 2000);
  EXPECT_EQ(with.links()[static_cast<size_t>(from_host)].latency_ns, 2000);
  for (int a = 0; a < 4; ++a) {
    for (int b = 0; b < 4; ++b) {
      EXPECT_EQ(with.Route(a, b), without.Route(a, b));
      EXPECT_EQ(with.RouteBySearch(a, b), without.RouteBySearch(a, b));
    }
  }
}

TEST(NodeGroups, BadGroupsAreRefusedAtTheirKeys) {
  ScratchDir dir;
  const auto error = [&](const std::string& topology) { return LoadError(dir, MlpScenario(topology, 4)); };
  EXPECT_NE(error("  device: {name: x, peak: 1TFLOPS, memory: 1GiB}\n" + TwoGroups())
                .find("topology.device: not used with topology.groups"),
            std::string::npos);
  EXPECT_NE(error("  groups: []\n").find("topology.groups: expected at least one group"), std::string::npos);
  EXPECT_NE(error("  groups: [{nodes: 1, device: {name: x, peak: 1TFLOPS, memory: 1GiB}}]\n")
                .find("topology.groups.0: missing required key 'devices_per_node'"),
            std::string::npos)
      << error("  groups: [{nodes: 1, device: {name: x, peak: 1TFLOPS, memory: 1GiB}}]\n");
  EXPECT_NE(error("  groups: [{nodes: 1, devices_per_node: 2, device: NoSuchDevice}]\n")
                .find("no device 'NoSuchDevice' in the device library"),
            std::string::npos);
  // Four ranks need four devices: one group of two is too small.
  EXPECT_NE(error("  groups: [{nodes: 1, devices_per_node: 2, device: {name: x, peak: 1TFLOPS, memory: 1GiB}}]\n")
                .find("topology has 2 devices but pipeline.ranks is 4"),
            std::string::npos);
  EXPECT_NE(error(TwoGroups() + "  host: {memory: 1TiB}\n").find("topology.host: missing required key 'bandwidth'"),
            std::string::npos)
      << error(TwoGroups() + "  host: {memory: 1TiB}\n");
}

}  // namespace
}  // namespace stagecraft::sim
