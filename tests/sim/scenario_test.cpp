// Tests for scenario/src/scenario.cpp (and scenario_blocks.cpp, yaml_util.cpp): a valid scenario
// read field by field, each kind of bad input with the exact "file:line:col: " of the bad
// value (positions found in the text itself), --set overrides, and every shipped scenario.
#include "stagecraft/sim/scenario_checks.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <string>
#include <vector>

#include "sim_test_util.h"

namespace stagecraft::sim {
namespace {

using testing::ErrorOf;
using testing::PosOf;
using testing::Replace;
using testing::ScratchDir;
using testing::StartsWith;

// Line numbers matter: tests find positions with PosOf, never by counting here.
const std::string kBase = R"(name: tiny
topology:
  device: {name: gpu, peak: 100TFLOPS, memory: 16GiB, efficiency: 0.5}
  nodes: 1
  devices_per_node: 4
  links:
    - {scope: node, bandwidth: 100GB/s, latency: 2us}
model:
  costs: {forward: 1ms, backward_input: 2ms, backward_weight: 500us, activation_bytes: 1MiB, weight_bytes: 10MiB}
pipeline:
  schedule: 1f1b
  ranks: 4
  microbatches: 8
)";

using testing::LoadError;

TEST(LoadScenario, ReadsEveryField) {
  ScratchDir dir;
  const std::string text = kBase + R"(  chunks: 2
  microbatch_size: 4
  steps: 3
  recompute: true
training: {optimizer: adam, lr: 0.001, momentum: 0.5, seed: 7, dtype: bf16}
)";
  const std::string text2 = Replace(text, "schedule: 1f1b", "schedule: interleaved");
  const Scenario s = LoadScenario(dir.Write("scenario.yaml", text2), {});
  EXPECT_EQ(s.name, "tiny");
  EXPECT_EQ(s.topology.device.name, "gpu");
  EXPECT_DOUBLE_EQ(s.topology.device.peak_flops, 100e12);
  EXPECT_EQ(s.topology.device.memory_bytes, 16LL << 30);
  EXPECT_DOUBLE_EQ(s.topology.device.efficiency, 0.5);
  EXPECT_EQ(s.topology.nodes, 1);
  EXPECT_EQ(s.topology.devices_per_node, 4);
  ASSERT_EQ(s.topology.links.size(), 1u);
  EXPECT_EQ(s.topology.links[0].scope, LinkScope::kNode);
  EXPECT_DOUBLE_EQ(s.topology.links[0].bandwidth_bytes_per_s, 100e9);
  EXPECT_EQ(s.topology.links[0].latency_ns, 2000);
  ASSERT_TRUE(s.model.costs.has_value());
  EXPECT_EQ(s.model.costs->forward_ns, std::vector<int64_t>(4, 1'000'000));
  EXPECT_EQ(s.model.costs->backward_input_ns, std::vector<int64_t>(4, 2'000'000));
  EXPECT_EQ(s.model.costs->backward_weight_ns, std::vector<int64_t>(4, 500'000));
  EXPECT_EQ(s.model.costs->activation_bytes, std::vector<int64_t>(4, 1 << 20));
  EXPECT_EQ(s.model.costs->weight_bytes, std::vector<int64_t>(4, 10 << 20));
  EXPECT_EQ(s.model.costs->p2p_latency_ns, 0);
  EXPECT_EQ(s.model.costs->send_bytes, 0);
  EXPECT_FALSE(s.model.transformer.has_value());
  EXPECT_EQ(s.pipeline.schedules, std::vector<std::string>{"interleaved"});
  EXPECT_EQ(s.pipeline.ranks, 4);
  EXPECT_EQ(s.pipeline.chunks, 2);
  EXPECT_EQ(s.pipeline.microbatches, 8);
  EXPECT_EQ(s.pipeline.microbatch_size, 4);
  EXPECT_EQ(s.pipeline.steps, 3);
  EXPECT_EQ(s.pipeline.recompute, Recompute::kFull);
  EXPECT_FALSE(s.pipeline.vertical_sync);
  ASSERT_TRUE(s.has_training);
  EXPECT_EQ(s.training.optimizer, Optimizer::kAdam);
  EXPECT_DOUBLE_EQ(s.training.lr, 0.001);
  EXPECT_DOUBLE_EQ(s.training.momentum, 0.5);
  EXPECT_EQ(s.training.seed, 7);
  EXPECT_EQ(s.training.dtype, Dtype::kBf16);
}

TEST(LoadScenario, DefaultsAndScheduleForms) {
  ScratchDir dir;
  Scenario s = LoadScenario(dir.Write("a.yaml", kBase), {});
  EXPECT_EQ(s.pipeline.chunks, 0);  // not stated: each schedule runs its own
  EXPECT_EQ(s.pipeline.microbatch_size, 1);
  EXPECT_EQ(s.pipeline.steps, 1);
  EXPECT_FALSE(s.has_training);
  s = LoadScenario(dir.Write("b.yaml", Replace(kBase, "schedule: 1f1b", "schedule: all")), {});
  EXPECT_EQ(s.pipeline.schedules, std::vector<std::string>{"all"});
  s = LoadScenario(dir.Write("c.yaml", Replace(kBase, "schedule: 1f1b", "schedule: [gpipe, zb-h1]")), {});
  EXPECT_EQ(s.pipeline.schedules, (std::vector<std::string>{"gpipe", "zb-h1"}));
}

TEST(LoadScenario, PerRankCostLists) {
  ScratchDir dir;
  const std::string text = Replace(kBase, "forward: 1ms,", "forward: [1ms, 2ms, 3ms, 4ms],");
  const Scenario s = LoadScenario(dir.Write("scenario.yaml", text), {});
  EXPECT_EQ(s.model.costs->forward_ns, (std::vector<int64_t>{1'000'000, 2'000'000, 3'000'000, 4'000'000}));
}

TEST(LoadScenario, MissingFile) {
  ScratchDir dir;
  const std::string path = dir.Path("nope.yaml");
  EXPECT_EQ(ErrorOf([&] { LoadScenario(path, {}); }), path + ": cannot read: no such file or directory");
}

TEST(LoadScenario, MalformedYaml) {
  ScratchDir dir;
  // The flow map opened on line 3 is never closed; yaml-cpp gives up at the end, line 4.
  const std::string text = "name: x\npipeline:\n  ranks: {a: 1\n";
  EXPECT_EQ(LoadError(dir, text), dir.Path("scenario.yaml") + ":4:1: end of map flow not found");
  // Tabs for indentation are a yaml-cpp syntax error with a position.
  const std::string tabs = "name: x\npipeline:\n\tranks: 4\n";
  const std::string tab_error = LoadError(dir, tabs);
  EXPECT_TRUE(StartsWith(tab_error, dir.Path("scenario.yaml") + ":3:")) << tab_error;
}

TEST(LoadScenario, UnknownKey) {
  ScratchDir dir;
  const std::string text = Replace(kBase, "  microbatches: 8", "  microbatchs: 8");
  const std::string error = LoadError(dir, text);
  EXPECT_EQ(error, dir.Path("scenario.yaml") + ":" + PosOf(text, "microbatchs") +
                       ": pipeline: unknown key 'microbatchs' (known: schedule, ranks, chunks, microbatches, "
                       "microbatch_size, steps, recompute, vertical_sync, partition, p2p, p2p_buffers, data_parallel, "
                "context_parallel, context_parallel_comm, tensor_parallel, "
                "sequence_parallel, tensor_parallel_overlap, grad_reduce_overlap, zero, placement, memory_limit, search_evaluations, zb_refine_nodes, ranks_per_device, offload, task_scheduler, expert_parallel, a2a_overlap, moe_dispatcher, param_gather_overlap, recompute_modules); did you mean 'microbatches'?");
  const std::string nested = Replace(kBase, "efficiency: 0.5", "efficency: 0.5");
  EXPECT_TRUE(StartsWith(LoadError(dir, nested), dir.Path("scenario.yaml") + ":" + PosOf(nested, "efficency") +
                                                     ": topology.device: unknown key 'efficency'"));
  const std::string top = kBase + "trainig: {optimizer: sgd, lr: 0.1}\n";
  EXPECT_TRUE(StartsWith(LoadError(dir, top),
                         dir.Path("scenario.yaml") + ":" + PosOf(top, "trainig") + ": unknown key 'trainig'"));
}

TEST(LoadScenario, DuplicateKey) {
  ScratchDir dir;
  const std::string text = kBase + "  ranks: 2\n";
  const size_t second = text.rfind("ranks: 2");
  const std::string error = LoadError(dir, text);
  EXPECT_EQ(error, dir.Path("scenario.yaml") + ":" + PosOf(text.substr(0, second) + "@", "@") +
                       ": pipeline: duplicate key 'ranks'");
}

TEST(LoadScenario, NegativeAndZeroSizes) {
  ScratchDir dir;
  const std::string negative = Replace(kBase, "memory: 16GiB", "memory: -16GiB");
  EXPECT_EQ(LoadError(dir, negative), dir.Path("scenario.yaml") + ":" + PosOf(negative, "-16GiB") +
                                          ": topology.device.memory: expected a size like 80GiB, got '-16GiB' "
                                          "(negative)");
  const std::string zero = Replace(kBase, "memory: 16GiB", "memory: 0");
  EXPECT_EQ(LoadError(dir, zero), dir.Path("scenario.yaml") + ":" + PosOf(zero, "0, efficiency") +
                                      ": topology.device.memory: expected a size > 0 like 80GiB, got '0'");
  const std::string bandwidth = Replace(kBase, "bandwidth: 100GB/s", "bandwidth: 0GB/s");
  EXPECT_TRUE(StartsWith(LoadError(dir, bandwidth), dir.Path("scenario.yaml") + ":" + PosOf(bandwidth, "0GB/s") +
                                                        ": topology.links.0.bandwidth: expected a bandwidth from 1KB/s to 10PB/s, got '0GB/s'"));
  const std::string microbatches = Replace(kBase, "microbatches: 8", "microbatches: 0");
  EXPECT_EQ(LoadError(dir, microbatches), dir.Path("scenario.yaml") + ":" + PosOf(microbatches, "0\n") +
                                              ": pipeline.microbatches: expected an integer in [1, 16777216], got '0'");
  const std::string efficiency = Replace(kBase, "efficiency: 0.5", "efficiency: 1.5");
  EXPECT_EQ(LoadError(dir, efficiency), dir.Path("scenario.yaml") + ":" + PosOf(efficiency, "1.5") +
                                            ": topology.device.efficiency: expected a number from 0.001 to 1, got '1.5'");
}

TEST(LoadScenario, CostListOfWrongLength) {
  ScratchDir dir;
  const std::string text = Replace(kBase, "forward: 1ms,", "forward: [1ms, 1ms, 1ms],");
  EXPECT_EQ(LoadError(dir, text), dir.Path("scenario.yaml") + ":" + PosOf(text, "[1ms") +
                                      ": model.costs.forward: expected 4 entries (one per rank), got 3");
  const std::string bad_entry = Replace(kBase, "forward: 1ms,", "forward: [1ms, 1ms, 1xs, 1ms],");
  EXPECT_TRUE(StartsWith(LoadError(dir, bad_entry), dir.Path("scenario.yaml") + ":" + PosOf(bad_entry, "1xs") +
                                                        ": model.costs.forward.2: expected a duration"));
}

TEST(LoadScenario, FewerDevicesThanRanks) {
  ScratchDir dir;
  const std::string text = Replace(kBase, "ranks: 4", "ranks: 16");
  EXPECT_EQ(LoadError(dir, text), dir.Path("scenario.yaml") + ":" + PosOf(text, "16\n") +
                                      ": pipeline.ranks: topology has 4 devices but pipeline.ranks is 16");
}

// The per-rank cost lists were sized by pipeline.ranks (up to 2^30) before
// the ranks were checked against the devices, and a topology could declare 2^30 devices.
TEST(LoadScenario, RanksAndDevicesAreBoundedBeforeAnythingIsSizedByThem) {
  ScratchDir dir;
  const std::string text = Replace(Replace(kBase, "ranks: 4", "ranks: 1000000000"), "schedule: 1f1b", "schedule: all");
  EXPECT_EQ(LoadError(dir, text), dir.Path("scenario.yaml") + ":" + PosOf(text, "1000000000") +
                                      ": pipeline.ranks: expected an integer in [1, 65536], got '1000000000'");
  const std::string devices = Replace(kBase, "devices_per_node: 4", "devices_per_node: 65537");
  EXPECT_EQ(LoadError(dir, devices), dir.Path("scenario.yaml") + ":" + PosOf(devices, "65537") +
                                         ": topology.devices_per_node: expected an integer in [1, 65536], got '65537'");
  const std::string product = Replace(Replace(kBase, "nodes: 1", "nodes: 2"), "devices_per_node: 4", "devices_per_node: 32769");
  EXPECT_EQ(LoadError(dir, product), dir.Path("scenario.yaml") + ":" + PosOf(product, "device: {") +
                                         ": topology: expected nodes * devices_per_node to be at most 2^16");
}

TEST(LoadScenario, MissingRequiredKeyPointsAtParent) {
  ScratchDir dir;
  const std::string text = Replace(kBase, "  ranks: 4\n", "");
  EXPECT_EQ(LoadError(dir, text),
            dir.Path("scenario.yaml") + ":" + PosOf(text, "schedule:") + ": pipeline: missing required key 'ranks'");
  const std::string no_name = Replace(kBase, "name: tiny\n", "");
  EXPECT_EQ(LoadError(dir, no_name), dir.Path("scenario.yaml") + ":1:1: missing required key 'name'");
}

TEST(LoadScenario, ModelNeedsSomething) {
  ScratchDir dir;
  const std::string costs_line =
      "  costs: {forward: 1ms, backward_input: 2ms, backward_weight: 500us, activation_bytes: 1MiB, weight_bytes: "
      "10MiB}\n";
  const std::string text = Replace(Replace(kBase, costs_line, ""), "model:\n", "model: {}\n");
  EXPECT_EQ(LoadError(dir, text), dir.Path("scenario.yaml") + ":" + PosOf(text, "{}") +
                                      ": model: expected at least one of transformer, mlp, costs or profile");
}

TEST(LoadScenario, BadValues) {
  ScratchDir dir;
  const std::string schedule = Replace(kBase, "schedule: 1f1b", "schedule: 1f1c");
  EXPECT_TRUE(StartsWith(LoadError(dir, schedule), dir.Path("scenario.yaml") + ":" + PosOf(schedule, "1f1c") +
                                                       ": pipeline.schedule: unknown schedule '1f1c' (known: gpipe"));
  // interleaved's rounds of microbatches: the generator's own rule, reported at the schedule.
  const std::string interleaved =
      Replace(Replace(kBase, "schedule: 1f1b", "schedule: interleaved"), "microbatches: 8", "microbatches: 9");
  EXPECT_EQ(LoadError(dir, interleaved),
            dir.Path("scenario.yaml") + ":" + PosOf(interleaved, "interleaved") +
                ": pipeline.schedule: interleaved: interleaved needs microbatches to divide into max(1, microbatches / "
                "ranks) = 2 rounds (got 9 microbatches, 4 ranks; PyTorch's Interleaved1F1B)");
  const std::string boolean = kBase + "  recompute: maybe\n";
  EXPECT_EQ(LoadError(dir, boolean), dir.Path("scenario.yaml") + ":" + PosOf(boolean, "maybe") +
                                         ": pipeline.recompute: expected one of none, selective, full, got 'maybe'");
  const std::string scope = Replace(kBase, "scope: node", "scope: rack");
  EXPECT_EQ(LoadError(dir, scope), dir.Path("scenario.yaml") + ":" + PosOf(scope, "rack") +
                                       ": topology.links.0.scope: expected one of node, cluster, got 'rack'");
  const std::string no_node_link = Replace(kBase, "    - {scope: node, bandwidth: 100GB/s, latency: 2us}\n",
                                           "    - {scope: cluster, bandwidth: 100GB/s, latency: 2us}\n");
  EXPECT_TRUE(StartsWith(LoadError(dir, no_node_link), dir.Path("scenario.yaml") + ":" +
                                                           PosOf(no_node_link, "- {scope") +
                                                           ": topology.links: expected a link with scope: node"));
}

TEST(LoadScenario, TransformerNeedsALayerPerStage) {
  ScratchDir dir;
  const std::string text =
      Replace(kBase,
              "costs: {forward: 1ms, backward_input: 2ms, backward_weight: 500us, activation_bytes: 1MiB, "
              "weight_bytes: 10MiB}",
              "transformer: {layers: 3, hidden: 64, heads: 4, seq: 16, vocab: 100}");
  EXPECT_EQ(LoadError(dir, text), dir.Path("scenario.yaml") + ":" + PosOf(text, "3, hidden") +
                                      ": model.transformer.layers: expected at least 4 layers, one per stage "
                                      "(pipeline.ranks x pipeline.chunks), got 3");
}

TEST(LoadScenario, SetOverridesValues) {
  ScratchDir dir;
  const std::string path = dir.Write("scenario.yaml", kBase);
  Scenario s = LoadScenario(path, {"pipeline.microbatches=32"});
  EXPECT_EQ(s.pipeline.microbatches, 32);
  s = LoadScenario(path, {"pipeline.microbatches=32", "pipeline.microbatches=16", "pipeline.steps=2",
                          "pipeline.schedule=[gpipe, 1f1b]", "topology.links.0.latency=3us",
                          "training={optimizer: sgd, lr: 0.1}", "model.costs.forward=[1ms, 2ms, 3ms, 4ms]"});
  EXPECT_EQ(s.pipeline.microbatches, 16);
  EXPECT_EQ(s.pipeline.steps, 2);
  EXPECT_EQ(s.pipeline.schedules, (std::vector<std::string>{"gpipe", "1f1b"}));
  EXPECT_EQ(s.topology.links[0].latency_ns, 3000);
  EXPECT_TRUE(s.has_training);
  EXPECT_EQ(s.training.optimizer, Optimizer::kSgd);
  EXPECT_EQ(s.model.costs->forward_ns, (std::vector<int64_t>{1'000'000, 2'000'000, 3'000'000, 4'000'000}));
}

// training.loss_scale: a power of two from 1 to 2^24 (exact scaling), 0 when not given.
TEST(LoadScenario, LossScaleIsAPowerOfTwo) {
  ScratchDir dir;
  const std::string path = dir.Write("scenario.yaml", kBase);
  EXPECT_EQ(LoadScenario(path, {"training={optimizer: sgd, lr: 0.1}"}).training.loss_scale, 0.0);
  EXPECT_EQ(LoadScenario(path, {"training={optimizer: sgd, lr: 0.1, loss_scale: 1}"}).training.loss_scale, 1.0);
  EXPECT_EQ(LoadScenario(path, {"training={optimizer: sgd, lr: 0.1, loss_scale: 65536}"}).training.loss_scale, 65536.0);
  const auto error = [&](const std::string& v) {
    return ErrorOf([&] { LoadScenario(path, {"training={optimizer: sgd, lr: 0.1, loss_scale: " + v + "}"}); });
  };
  const std::string prefix = "--set training: training.loss_scale: ";
  EXPECT_EQ(error("3000"), prefix + "expected a power of two (1, 2, 4, ... 16777216), got '3000'");
  EXPECT_EQ(error("0.5"), prefix + "expected a power of two (1, 2, 4, ... 16777216), got '0.5'");
  EXPECT_EQ(error("0"), prefix + "expected a number in (0, 16777216], got '0'");
  EXPECT_EQ(error("33554432"), prefix + "expected a number in (0, 16777216], got '33554432'");
  EXPECT_EQ(error("big"), prefix + "expected a number in (0, 16777216], got 'big'");
}

TEST(LoadScenario, SetErrorsNameTheOverride) {
  ScratchDir dir;
  const std::string path = dir.Write("scenario.yaml", kBase);
  const auto error = [&](const std::string& set) { return ErrorOf([&] { LoadScenario(path, {set}); }); };
  EXPECT_EQ(error("pipeline.microbatchs=32"),
            "--set pipeline.microbatchs=32: unknown key 'microbatchs' (known: schedule, ranks, chunks, microbatches, "
            "microbatch_size, steps, recompute, vertical_sync, partition, p2p, p2p_buffers, data_parallel, "
                "context_parallel, context_parallel_comm, tensor_parallel, "
                "sequence_parallel, tensor_parallel_overlap, grad_reduce_overlap, zero, placement, memory_limit, search_evaluations, zb_refine_nodes, ranks_per_device, offload, task_scheduler, expert_parallel, a2a_overlap, moe_dispatcher, param_gather_overlap, recompute_modules); did you mean 'microbatches'?");
  EXPECT_TRUE(StartsWith(error("pipline.ranks=2"), "--set pipline.ranks=2: unknown key 'pipline' (known: name,"));
  EXPECT_EQ(error("pipeline.microbatches=abc"), "--set pipeline.microbatches: expected an integer in [1, 16777216], got 'abc'");
  EXPECT_EQ(error("pipeline.microbatches=-3"), "--set pipeline.microbatches: expected an integer in [1, 16777216], got '-3'");
  EXPECT_EQ(error("pipeline.ranks=16"), "--set pipeline.ranks: topology has 4 devices but pipeline.ranks is 16");
  // Ranks sharing a device need fewer devices: 8 ranks at 2 per device fit the 4, 16 do not.
  EXPECT_EQ(LoadScenario(path, {"pipeline.ranks=8", "pipeline.ranks_per_device=2"}).pipeline.devices(), 4);
  EXPECT_EQ(error("pipeline={schedule: 1f1b, ranks: 16, microbatches: 8, ranks_per_device: 2}"),
            "--set pipeline: pipeline.ranks: topology has 4 devices but pipeline.ranks is 16 (2 ranks per device)");
  EXPECT_EQ(error("pipeline.ranks_per_device=5"),
            "--set pipeline.ranks_per_device: 5 ranks per device but pipeline.ranks is 4");
  EXPECT_EQ(error("pipeline.ranks_per_device=0"),
            "--set pipeline.ranks_per_device: expected an integer in [1, 65536], got '0'");
  // How a shared device splits itself: a duration (0, the default, processor sharing).
  EXPECT_EQ(LoadScenario(path, {}).topology.device.time_slice_ns, 0);
  EXPECT_EQ(LoadScenario(path, {"topology.device.time_slice=3ms"}).topology.device.time_slice_ns, 3'000'000);
  EXPECT_TRUE(StartsWith(error("topology.device.time_slice=soon"), "--set topology.device.time_slice: expected a duration"))
      << error("topology.device.time_slice=soon");
  EXPECT_EQ(error("topology.device.time_slice=1us"),
            "--set topology.device.time_slice: expected 0 (processor sharing) or a turn of at least 10us, got '1us'");
  EXPECT_EQ(error("pipeline={ranks: 2}"), "--set pipeline: missing required key 'schedule'");
  EXPECT_EQ(error("pipeline={schedule: gpipe, ranks: 2, microbatches: x}"),
            "--set pipeline: pipeline.microbatches: expected an integer in [1, 16777216], got 'x'");
  EXPECT_EQ(error("microbatches"), "--set microbatches: expected key.path=value, e.g. pipeline.microbatches=32");
  EXPECT_EQ(error("name.first=x"), "--set name.first=x: 'name' is a single value, not a map");
  EXPECT_EQ(error("topology.links.3.latency=1us"),
            "--set topology.links.3.latency=1us: 'topology.links' is a list of 1 entries; expected an index 0..0, "
            "got '3'");
  EXPECT_EQ(error("pipeline.microbatches=[1"),
            "--set pipeline.microbatches: value is not valid YAML: end of sequence flow not found");
  // A --set below a block the file does not have creates it; what is missing there names the --set.
  EXPECT_EQ(error("training.lr=0.1"), "--set training.lr=0.1: training: missing required key 'optimizer'");
  // A later override of a parent replaces an earlier one below it, and errors name the later one.
  EXPECT_EQ(ErrorOf([&] {
              LoadScenario(path, {"pipeline.ranks=x", "pipeline={schedule: gpipe, ranks: y}"});
            }),
            "--set pipeline: pipeline.ranks: expected an integer in [1, 65536], got 'y'");
}

TEST(LoadScenario, TopologyFromFile) {
  ScratchDir dir;
  const std::string topology = R"(# a small node
device: {name: gpu, peak: 100TFLOPS, memory: 16GiB}
nodes: 2
devices_per_node: 2
links:
  - {scope: node, bandwidth: 100GB/s, latency: 2us}
  - {scope: cluster, bandwidth: 10GB/s, latency: 5us}
)";
  dir.Write("topologies/small.yaml", topology);
  const std::string inline_topology =
      "  device: {name: gpu, peak: 100TFLOPS, memory: 16GiB, efficiency: 0.5}\n  nodes: 1\n  devices_per_node: 4\n"
      "  links:\n    - {scope: node, bandwidth: 100GB/s, latency: 2us}\n";
  const std::string text =
      Replace(Replace(kBase, inline_topology, ""), "topology:\n", "topology: topologies/small.yaml\n");
  const std::string path = dir.Write("scenario.yaml", text);
  Scenario s = LoadScenario(path, {});
  EXPECT_EQ(s.topology.nodes, 2);
  EXPECT_EQ(s.topology.devices(), 4);
  EXPECT_DOUBLE_EQ(s.topology.device.efficiency, 1.0);
  ASSERT_EQ(s.topology.links.size(), 2u);
  EXPECT_EQ(s.topology.links[1].latency_ns, 5000);

  // --set reaches into the included file.
  s = LoadScenario(path, {"topology.device.memory=8GiB"});
  EXPECT_EQ(s.topology.device.memory_bytes, 8LL << 30);

  // Errors inside it name that file.
  const std::string bad = Replace(topology, "latency: 5us", "latency: 5 lightyears");
  const std::string bad_path = dir.Write("topologies/small.yaml", bad);
  EXPECT_TRUE(
      StartsWith(ErrorOf([&] { LoadScenario(path, {}); }),
                 bad_path + ":" + PosOf(bad, "5 lightyears") + ": topology.links.1.latency: expected a duration"));
  // ... an override value inside it names the override.
  dir.Write("topologies/small.yaml", topology);
  EXPECT_TRUE(StartsWith(ErrorOf([&] { LoadScenario(path, {"topology.device.peak=fast"}); }),
                         "--set topology.device.peak: expected a compute rate"));
  // A missing topology file is reported where it is named.
  const std::string missing = Replace(text, "topologies/small.yaml", "topologies/none.yaml");
  const std::string missing_path = dir.Write("scenario.yaml", missing);
  EXPECT_EQ(ErrorOf([&] { LoadScenario(missing_path, {}); }), missing_path + ":" + PosOf(missing, "topologies/none") +
                                                                  ": topology: " + dir.Path("topologies/none.yaml") +
                                                                  ": cannot read: no such file or directory");
  // Given through --set, a relative file name is relative to the current directory.
  EXPECT_EQ(ErrorOf([&] { LoadScenario(missing_path, {"topology=topologies/none.yaml"}); }),
            "--set topology: topologies/none.yaml: cannot read: no such file or directory");
  s = LoadScenario(missing_path, {"topology=" + dir.Path("topologies/small.yaml")});
  EXPECT_EQ(s.topology.nodes, 2);
}

TEST(LoadScenario, ExplicitGraphTopology) {
  ScratchDir dir;
  const std::string graph = R"(name: graph
topology:
  device: {name: gpu, peak: 100TFLOPS, memory: 16GiB}
  vertices:
    - {name: g0, kind: device}
    - {name: g1, kind: device}
    - {name: sw, kind: switch}
  links:
    - {a: g0, b: sw, bandwidth: 10GB/s, latency: 1us}
    - {a: g1, b: sw, bandwidth: 20GB/s, latency: 2us}
model:
  costs: {forward: 1ms, backward_input: 1ms, backward_weight: 1ms}
pipeline: {schedule: gpipe, ranks: 2, microbatches: 2}
)";
  const Scenario s = LoadScenario(dir.Write("graph.yaml", graph), {});
  EXPECT_TRUE(s.topology.explicit_graph());
  EXPECT_EQ(s.topology.devices(), 2);
  ASSERT_EQ(s.topology.graph_links.size(), 2u);
  EXPECT_EQ(s.topology.graph_links[1].a, "g1");
  EXPECT_DOUBLE_EQ(s.topology.graph_links[1].bandwidth_bytes_per_s, 20e9);
  EXPECT_EQ(s.topology.vertices[2].kind, VertexKind::kSwitch);

  const std::string unknown = Replace(graph, "b: sw, bandwidth: 20GB/s", "b: sx, bandwidth: 20GB/s");
  EXPECT_EQ(LoadError(dir, unknown), dir.Path("scenario.yaml") + ":" + PosOf(unknown, "sx") +
                                         ": topology.links.1.b: unknown vertex 'sx' (vertices: g0, g1, sw)");
  // g1 has no link: the graph is not connected.
  const std::string split = Replace(graph, "    - {a: g1, b: sw, bandwidth: 20GB/s, latency: 2us}\n", "");
  EXPECT_EQ(LoadError(dir, split), dir.Path("scenario.yaml") + ":" + PosOf(split, "device: {") +
                                       ": topology: device 1 (g1) cannot reach device 0 (g0)");
}

TEST(LoadScenario, ProfilePaths) {
  ScratchDir dir;
  // One layer per rank: LoadScenario builds the costs (the run's bound is checked at load).
  const std::string layer =
      "{forward: 1ms, backward_input: 1ms, backward_weight: 1ms, activation_bytes: 1KiB, weight_bytes: 1KiB}";
  dir.Write("profiles/p.yaml",
            "microbatch_size: 1\nlayers: [" + layer + ", " + layer + ", " + layer + ", " + layer + "]\n");
  const std::string text = Replace(kBase, "model:\n", "model:\n  profile: profiles/p.yaml\n");
  const std::string path = dir.Write("scenario.yaml", text);
  EXPECT_EQ(LoadScenario(path, {}).model.profile_path, dir.Path("profiles/p.yaml"));
  // Through --set: relative to the current directory, so this one is not found.
  EXPECT_EQ(ErrorOf([&] { LoadScenario(path, {"model.profile=profiles/p.yaml"}); }),
            "--set model.profile: profiles/p.yaml: cannot read: no such file or directory");
  const std::string absolute = dir.Path("profiles/p.yaml");
  EXPECT_EQ(LoadScenario(path, {"model.profile=" + absolute}).model.profile_path, absolute);
}

TEST(LoadScenario, EveryShippedScenarioLoads) {
  const std::vector<std::string> shipped = testing::ShippedScenarios();
  for (const std::string& path : shipped) EXPECT_EQ(ErrorOf([&] { LoadScenario(path, {}); }), "") << path;
  EXPECT_GE(shipped.size(), 4u);
}

TEST(LoadScenario, EveryShippedTopologyLoads) {
  const std::filesystem::path root = std::filesystem::path(STAGECRAFT_SOURCE_DIR) / "scenarios";
  const std::string scenario = (root / "uniform-costs.yaml").string();
  int loaded = 0;
  for (const auto& entry : std::filesystem::directory_iterator(root / "topologies")) {
    if (entry.path().extension() != ".yaml") continue;
    SCOPED_TRACE(entry.path().string());
    EXPECT_EQ(ErrorOf([&] { LoadScenario(scenario, {"topology=" + entry.path().string()}); }), "");
    ++loaded;
  }
  EXPECT_GE(loaded, 2);
}

}  // namespace
}  // namespace stagecraft::sim
