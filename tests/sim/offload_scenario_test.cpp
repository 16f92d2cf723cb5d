// pipeline.offload (DESIGN.md §10): what a scenario states of copies to host memory, and each bad
// value refused in one located line (tests/harness/offload_refused_test.cpp: a job stating copies
// is refused until they are priced).
#include <string>

#include <gtest/gtest.h>

#include "sim_test_util.h"

namespace stagecraft::sim::testing {
namespace {

const char* const kBase =
    "name: offload\n"
    "topology:\n"
    "  device: {name: unit, peak: 1TFLOPS, memory: 16GiB, efficiency: 0.5}\n"
    "  nodes: 1\n"
    "  devices_per_node: 2\n"
    "  host: {memory: 256GiB, bandwidth: 32GB/s, latency: 2us}\n"
    "  links: [{scope: node, bandwidth: 100GB/s, latency: 1us}]\n"
    "model:\n"
    "  mlp: {layers: 4, hidden: 256}\n"
    "pipeline:\n"
    "  schedule: 1f1b\n"
    "  ranks: 2\n"
    "  microbatches: 4\n"
    "  offload: {activations: 0.5}\n";

TEST(OffloadScenario, EveryKeyRead) {
  ScratchDir dir;
  const std::string all = Replace(kBase, "{activations: 0.5}", "{activations: 0.25, weights: spill, double_buffer: false}");
  const Scenario s = LoadScenario(dir.Write("all.yaml", all), {});
  EXPECT_DOUBLE_EQ(s.pipeline.offload.activations, 0.25);
  EXPECT_FALSE(s.pipeline.offload.activations_auto);
  EXPECT_EQ(s.pipeline.offload.weights, WeightsOffload::kSpill);
  EXPECT_EQ(s.pipeline.offload.optimizer, OptimizerPlace::kDevice);
  EXPECT_FALSE(s.pipeline.offload.double_buffer);
  // The optimizer on the host, with its DRAM's bandwidth (a GPU-like device's host must state it).
  const Scenario host = LoadScenario(
      dir.Write("host.yaml", Replace(Replace(kBase, "{activations: 0.5}", "{optimizer: host}"), "latency: 2us}",
                                     "latency: 2us, memory_bandwidth: 100GB/s, device_bandwidth: 16GB/s}")),
      {});
  EXPECT_EQ(host.pipeline.offload.optimizer, OptimizerPlace::kHost);
  EXPECT_DOUBLE_EQ(host.topology.host.memory_bandwidth_bytes_per_s, 100e9);
  // Each device's port (16 GB/s) under the node's 32: one alone copies at 16, two at 16 each,
  // three share the node's 32.
  EXPECT_DOUBLE_EQ(host.topology.host.device_bandwidth_bytes_per_s, 16e9);
  EXPECT_DOUBLE_EQ(host.topology.host.DeviceRate(), 16e9);
  EXPECT_DOUBLE_EQ(host.topology.host.DeviceRate(2), 16e9);
  EXPECT_DOUBLE_EQ(host.topology.host.DeviceRate(4), 8e9);
  EXPECT_TRUE(s.pipeline.offload.any());
  const Scenario automatic = LoadScenario(dir.Write("auto.yaml", kBase), {"pipeline.offload.activations=auto"});
  EXPECT_TRUE(automatic.pipeline.offload.activations_auto);
  EXPECT_EQ(automatic.pipeline.offload.weights, WeightsOffload::kNone);
  EXPECT_TRUE(automatic.pipeline.offload.double_buffer);
  const Scenario none = LoadScenario(dir.Write("none.yaml", Replace(kBase, "  offload: {activations: 0.5}\n", "")), {});
  EXPECT_FALSE(none.pipeline.offload.any());
}

TEST(OffloadScenario, BadValuesAreNamedWhereTheyAre) {
  ScratchDir dir;
  const std::string path = dir.Path("scenario.yaml");
  const std::string fraction = Replace(kBase, "activations: 0.5", "activations: 1.5");
  EXPECT_EQ(LoadError(dir, fraction), fmt::format("{}:{}: pipeline.offload.activations: expected auto or a fraction "
                                                  "from 0 to 1, got '1.5'",
                                                  path, PosOf(fraction, "1.5")));
  const std::string weights = Replace(kBase, "activations: 0.5", "weights: swap");
  EXPECT_NE(LoadError(dir, weights).find(fmt::format("{}:{}: pipeline.offload.weights: ", path, PosOf(weights, "swap"))),
            std::string::npos)
      << LoadError(dir, weights);
  const std::string unknown = Replace(kBase, "activations: 0.5", "gradients: host");
  EXPECT_NE(LoadError(dir, unknown).find("pipeline.offload"), std::string::npos) << LoadError(dir, unknown);
  const std::string no_host = Replace(kBase, "  host: {memory: 256GiB, bandwidth: 32GB/s, latency: 2us}\n", "");
  EXPECT_EQ(LoadError(dir, no_host),
            fmt::format("{}:{}: pipeline.offload: copies to host memory need topology.host (its memory and link)", path,
                        PosOf(no_host, "{activations: 0.5}")));
  // The optimizer on the host: not beside spilled weights, and with its DRAM's bandwidth stated.
  const std::string both = Replace(kBase, "{activations: 0.5}", "{weights: spill, optimizer: host}");
  EXPECT_EQ(LoadError(dir, both),
            fmt::format("{}:{}: pipeline.offload.optimizer: host keeps the optimizer state on the host, and spilled "
                        "weights bring it to the device for each STEP: choose one",
                        path, PosOf(both, "host}")));
  const std::string no_bandwidth = Replace(kBase, "{activations: 0.5}", "{optimizer: host}");
  EXPECT_NE(LoadError(dir, no_bandwidth).find("topology.host: pipeline.offload.optimizer: host runs each optimizer step on "
                                              "the host's CPU at its DRAM's bandwidth: state "
                                              "topology.host.memory_bandwidth"),
            std::string::npos)
      << LoadError(dir, no_bandwidth);
}

}  // namespace
}  // namespace stagecraft::sim::testing
