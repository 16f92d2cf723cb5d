// Tests for the ranges of stagecraft/scenario/limits.h as the scenario and profile readers apply
// them: for every stated duration, rate, size and count, the edge value itself loads and the
// next one past it is refused with one error naming the key and the limit.
#include "stagecraft/scenario/limits.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "sim_test_util.h"
#include "stagecraft/scenario/profile_yaml.h"
#include "stagecraft/sim/scenario_checks.h"

namespace stagecraft::sim {
namespace {

using testing::ErrorOf;
using testing::PosOf;
using testing::ScratchDir;

// Explicit costs with no backward, free links and no bytes sent: each edge case below is within
// every derived limit too, so only the stated range decides.
constexpr const char* kBase = R"(name: limits
topology:
  device: {name: gpu, peak: 100TFLOPS, memory: 16GiB, efficiency: 0.5}
  nodes: 1
  devices_per_node: 4
  links:
    - {scope: node, bandwidth: 100GB/s, latency: 0}
model:
  costs: {forward: 1ms, backward_input: 0, backward_weight: 0}
pipeline:
  schedule: 1f1b
  ranks: 4
  microbatches: 8
)";

struct Edge {
  std::string key;
  std::string inside;   // the limit itself: loads
  std::string outside;  // just past it: refused
  std::string expected;  // the error past it, after "--set KEY: "
  std::vector<std::string> with = {};  // further --set the case needs
};

// 2^50 + 1 bytes, 1 h + 1 ns.
const std::string kPiBPlusOne = "1125899906842625";
const std::string kHourPlusOne = "3600000000001ns";

const std::vector<Edge> kEdges = {
    {"model.costs.forward", "3600s", kHourPlusOne,
     "expected a duration of at most 3600s (1 h, the limit per op), got '3600000000001ns'"},
    {"model.costs.backward_input", "3600s", "1e9s",
     "expected a duration of at most 3600s (1 h, the limit per op), got '1e9s'"},
    {"model.costs.backward_weight", "3600s", "1e30s",
     "expected a duration of at most 3600s (1 h, the limit per op), got '1e30s'"},
    {"model.costs.p2p_latency", "3600s", kHourPlusOne,
     "expected a duration of at most 3600s (1 h, the limit per op), got '3600000000001ns'"},
    {"topology.links.0.latency", "3600s", kHourPlusOne,
     "expected a duration of at most 3600s (1 h, the limit per op), got '3600000000001ns'"},
    {"model.costs.activation_bytes", "1PiB", kPiBPlusOne,
     "expected a size of at most 1PiB (the limit per value), got '1125899906842625'"},
    {"model.costs.weight_bytes", "1PiB", "2PiB", "expected a size of at most 1PiB (the limit per value), got '2PiB'"},
    {"model.costs.send_bytes", "1PiB", kPiBPlusOne,
     "expected a size of at most 1PiB (the limit per value), got '1125899906842625'",
     {"topology.links.0.bandwidth=10PB/s"}},
    {"topology.device.memory", "1PiB", kPiBPlusOne,
     "expected a size of at most 1PiB (the limit per value), got '1125899906842625'"},
    {"topology.device.memory", "1B", "0", "expected a size > 0 like 80GiB, got '0'"},
    {"topology.links.0.bandwidth", "1KB/s", "999B/s", "expected a bandwidth from 1KB/s to 10PB/s, got '999B/s'"},
    {"topology.links.0.bandwidth", "10PB/s", "10.000001PB/s",
     "expected a bandwidth from 1KB/s to 10PB/s, got '10.000001PB/s'"},
    {"topology.device.peak", "1MFLOPS", "999KFLOPS", "expected a compute rate from 1MFLOPS to 1EFLOPS, got '999KFLOPS'"},
    {"topology.device.peak", "1EFLOPS", "1.000001EFLOPS",
     "expected a compute rate from 1MFLOPS to 1EFLOPS, got '1.000001EFLOPS'"},
    {"topology.device.efficiency", "0.001", "0.000999", "expected a number from 0.001 to 1, got '0.000999'"},
    {"topology.device.efficiency", "1", "1.000001", "expected a number from 0.001 to 1, got '1.000001'"},
    {"pipeline.ranks", "65536", "65537", "expected an integer in [1, 65536], got '65537'",
     {"topology.devices_per_node=65536"}},
    {"topology.devices_per_node", "65536", "65537", "expected an integer in [1, 65536], got '65537'"},
    {"pipeline.chunks", "1024", "1025", "expected an integer in [1, 1024], got '1025'", {"pipeline.schedule=interleaved"}},
    {"pipeline.microbatches", "16777216", "16777217", "expected an integer in [1, 16777216], got '16777217'"},
    {"pipeline.steps", "1048576", "1048577", "expected an integer in [1, 1048576], got '1048577'"},
    {"pipeline.microbatch_size", "16777216", "16777217", "expected an integer in [1, 16777216], got '16777217'"},
    {"model.transformer.layers", "1048576", "1048577", "expected an integer in [1, 1048576], got '1048577'",
     {"model.transformer={layers: 4, hidden: 64, heads: 4, seq: 16, vocab: 100}"}},
    {"model.transformer.hidden", "1048576", "1048577", "expected an integer in [1, 1048576], got '1048577'",
     {"model.transformer={layers: 4, hidden: 64, heads: 4, seq: 16, vocab: 100}"}},
    {"model.transformer.heads", "65536", "65537", "expected an integer in [1, 65536], got '65537'",
     {"model.transformer={layers: 4, hidden: 65536, heads: 4, seq: 16, vocab: 100}"}},
    {"model.transformer.seq", "16777216", "16777217", "expected an integer in [1, 16777216], got '16777217'",
     {"model.transformer={layers: 4, hidden: 64, heads: 4, seq: 16, vocab: 100}"}},
    {"model.transformer.vocab", "16777216", "16777217", "expected an integer in [1, 16777216], got '16777217'",
     {"model.transformer={layers: 4, hidden: 64, heads: 4, seq: 16, vocab: 100}"}},
    {"model.mlp.layers", "1048576", "1048577", "expected an integer in [1, 1048576], got '1048577'",
     {"model.mlp={layers: 4, hidden: 64}"}},
    {"model.mlp.hidden", "1048576", "1048577", "expected an integer in [1, 1048576], got '1048577'",
     {"model.mlp={layers: 4, hidden: 64}"}},
    {"training.lr", "1e300", "1e309", "expected a number > 0, got '1e309'", {"training={optimizer: sgd, lr: 0.1}"}},
};

TEST(Limits, EveryStatedRangeHasItsEdge) {
  ScratchDir dir;
  const std::string path = dir.Write("limits.yaml", kBase);
  for (const Edge& edge : kEdges) {
    std::vector<std::string> sets = edge.with;
    sets.push_back(edge.key + "=" + edge.inside);
    EXPECT_EQ(ErrorOf([&] { LoadScenario(path, sets); }), "") << edge.key << "=" << edge.inside;
    sets.back() = edge.key + "=" + edge.outside;
    EXPECT_EQ(ErrorOf([&] { LoadScenario(path, sets); }), "--set " + edge.key + ": " + edge.expected);
  }
}

TEST(Limits, StagesAreBoundedAsAProduct) {
  ScratchDir dir;
  const std::string path = dir.Write("limits.yaml", kBase);
  const std::vector<std::string> base = {"topology.devices_per_node=2048", "pipeline.ranks=2048",
                                         "pipeline.schedule=interleaved"};
  std::vector<std::string> sets = base;
  sets.push_back("pipeline.chunks=512");  // 2^20 stages
  EXPECT_EQ(ErrorOf([&] { LoadScenario(path, sets); }), "");
  sets.back() = "pipeline.chunks=513";
  EXPECT_EQ(ErrorOf([&] { LoadScenario(path, sets); }),
            "--set pipeline.chunks: expected pipeline.ranks x pipeline.chunks to be at most 2^20 stages, got 2048 x 513");
}

// An explicit graph: a star of `devices` devices around one switch.
std::string Star(int devices) {
  std::string vertices = "[{name: sw, kind: switch}";
  std::string links = "[";
  for (int d = 0; d < devices; ++d) {
    vertices += fmt::format(", {{name: g{}}}", d);
    links += fmt::format("{}{{a: g{}, b: sw, bandwidth: 1GB/s, latency: 1us}}", d == 0 ? "" : ", ", d);
  }
  return fmt::format("{{device: {{name: d, peak: 1TFLOPS, memory: 1GiB}}, vertices: {}], links: {}]}}", vertices,
                     links);
}

TEST(Limits, ExplicitGraphVertices) {
  ScratchDir dir;
  const std::string path = dir.Write("limits.yaml", kBase);
  EXPECT_EQ(ErrorOf([&] { LoadScenario(path, {"topology=" + Star(kMaxGraphVertices - 1)}); }), "");
  EXPECT_EQ(ErrorOf([&] { LoadScenario(path, {"topology=" + Star(kMaxGraphVertices)}); }),
            "--set topology: topology.vertices: expected at most 4096 vertices (a route search visits the whole "
            "graph), got 4097");
}

// The inputs of issue 26, each of which ended in SIGABRT (int64 nanoseconds overflowing in the
// event loop): each is now one InputError at load, before any schedule is built.
TEST(Limits, TheIssuesOverflowInputsAreRefusedAtLoad) {
  const std::string dir = STAGECRAFT_SOURCE_DIR "/scenarios/";
  const auto error = [&](const std::string& file, const std::vector<std::string>& sets) {
    return ErrorOf([&] { LoadScenario(dir + file, sets); });
  };
  EXPECT_EQ(error("mlp-cpu.yaml", {"topology.device.peak=1FLOPS"}),
            "--set topology.device.peak: expected a compute rate from 1MFLOPS to 1EFLOPS, got '1FLOPS'");
  EXPECT_EQ(error("mlp-cpu.yaml", {"topology.device.efficiency=1e-12"}),
            "--set topology.device.efficiency: expected a number from 0.001 to 1, got '1e-12'");
  EXPECT_EQ(error("uniform-costs.yaml", {"model.costs.forward=1e9s"}),
            "--set model.costs.forward: expected a duration of at most 3600s (1 h, the limit per op), got '1e9s'");
  EXPECT_EQ(error("uniform-costs.yaml", {"topology.links.0.latency=1e9s"}),
            "--set topology.links.0.latency: expected a duration of at most 3600s (1 h, the limit per op), got '1e9s'");
  EXPECT_EQ(error("mlp-cpu.yaml", {"model.mlp.hidden=1073741824"}),
            "--set model.mlp.hidden: expected an integer in [1, 1048576], got '1073741824'");
  EXPECT_EQ(error("gpt-1.3b-8xh100.yaml", {"model.transformer.seq=1073741824"}),
            "--set model.transformer.seq: expected an integer in [1, 16777216], got '1073741824'");
  EXPECT_EQ(error("uniform-costs.yaml", {"model.costs.forward=1e6s", "pipeline.microbatches=100000"}),
            "--set model.costs.forward: expected a duration of at most 3600s (1 h, the limit per op), got '1e6s'");
  // Within every stated range, what they derive is refused instead: a forward of 1.1e9 s.
  EXPECT_EQ(error("mlp-cpu.yaml", {"topology.device.peak=1MFLOPS", "model.mlp.hidden=1048576"}),
            dir + "mlp-cpu.yaml: a forward of stage 0 would take 1.1e+09 s (model.mlp: 4 layers of hidden 1048576, "
                  "microbatch 64, on topology.device: peak 1e+06 FLOPS x efficiency 0.5), above the limit of 1 h per op");
  // A profile layer of 1e9 s.
  ScratchDir scratch;
  const std::string text =
      "microbatch_size: 64\nlayers: [{forward: 1e9s, backward_input: 0, backward_weight: 0, activation_bytes: 0, "
      "weight_bytes: 0}]\n";
  const std::string profile = scratch.Write("p.yaml", text);
  EXPECT_EQ(error("mlp-cpu.yaml", {"model.profile=" + profile}),
            profile + ":" + PosOf(text, "1e9s") +
                ": layers.0.forward: expected a duration of at most 3600s (1 h, the limit per op), got '1e9s'");
}

constexpr const char* kProfile = R"(microbatch_size: 1
send_bytes: 1KiB
layers:
  - {forward: 1ms, backward_input: 1ms, backward_weight: 1ms, activation_bytes: 1KiB, weight_bytes: 1KiB}
)";

// A profile's stated values: `key: value` added to its one layer (or, with `top`, to the file).
std::string WithEntry(const std::string& entry, bool top = false) {
  std::string text = kProfile;
  if (top) return text + entry + "\n";
  return text.replace(text.find("weight_bytes: 1KiB}"), 19, "weight_bytes: 1KiB, " + entry + "}");
}

std::string ProfileError(const std::string& text) { return ErrorOf([&] { ProfileFromYaml(text, "p.yaml"); }); }

// "p.yaml:LINE:COL: " at `value` in `text`.
std::string At(const std::string& text, const std::string& value) { return "p.yaml:" + PosOf(text, value) + ": "; }

TEST(Limits, ProfileRanges) {
  EXPECT_EQ(ProfileError(WithEntry("step: 3600s")), "");
  std::string text = WithEntry("step: 1e9s");
  EXPECT_EQ(ProfileError(text),
            At(text, "1e9s") + "layers.0.step: expected a duration of at most 3600s (1 h, the limit per op), got '1e9s'");
  EXPECT_EQ(ProfileError(WithEntry("grad_bytes: 1PiB")), "");
  text = WithEntry("grad_bytes: " + kPiBPlusOne);
  EXPECT_EQ(ProfileError(text), At(text, kPiBPlusOne) +
                                    "layers.0.grad_bytes: expected a size of at most 1PiB (the limit per value), got "
                                    "'1125899906842625'");
  EXPECT_EQ(ProfileError(WithEntry("op_overhead: 3600s", true)), "");
  text = WithEntry("op_overhead: " + kHourPlusOne, true);
  EXPECT_EQ(ProfileError(text), At(text, kHourPlusOne) +
                                    "op_overhead: expected a duration of at most 3600s (1 h, the limit per op), got "
                                    "'3600000000001ns'");
  EXPECT_EQ(ProfileError(WithEntry("op_time_cv: 10", true)), "");
  text = WithEntry("op_time_cv: 10.01", true);
  EXPECT_EQ(ProfileError(text), At(text, "10.01") + "op_time_cv: expected a coefficient of variation from 0 to 10, "
                                                     "got '10.01'");
  EXPECT_EQ(ProfileError(WithEntry("p2p: {latency: 0, bandwidth: 1KB/s}", true)), "");
  text = WithEntry("p2p: {latency: 0, bandwidth: 999B/s}", true);
  EXPECT_EQ(ProfileError(text),
            At(text, "999B/s") + "p2p.bandwidth: expected a bandwidth from 1KB/s to 10PB/s, got '999B/s'");
  EXPECT_EQ(ProfileError(WithEntry("ranks: [{layers: 1048576, per_step: {forward: 1000}}]", true)), "");
  text = WithEntry("ranks: [{layers: 1048577}]", true);
  EXPECT_EQ(ProfileError(text),
            At(text, "1048577") + "ranks.0.layers: expected an integer in [1, 1048576], got '1048577'");
  text = WithEntry("ranks: [{per_step: {forward: 1000.1}}]", true);
  EXPECT_EQ(ProfileError(text),
            At(text, "1000.1") + "ranks.0.per_step.forward: expected a number in (0, 1000], got '1000.1'");
}

}  // namespace
}  // namespace stagecraft::sim
