// Helpers for the sim tests: a scratch directory per test, file writing, error capture, the
// 1-based "line:col" of text in a file (the oracle for located error messages), and small
// machines, cost tables, schedules and timed scripts for the engine and its units.
#pragma once

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "../schedules/generator_cases.h"
#include "stagecraft/base/error.h"
#include "stagecraft/schedules/generators.h"
#include "stagecraft/schedules/ir.h"
#include "stagecraft/schedules/lower.h"
#include "stagecraft/sim/cost_models.h"
#include "stagecraft/sim/cost_table.h"
#include "stagecraft/sim/event_loop.h"
#include "stagecraft/scenario/profile_yaml.h"
#include "stagecraft/sim/scenario_checks.h"
#include "stagecraft/sim/topology.h"

namespace stagecraft::sim::testing {

// A fresh directory named after the running test, removed at the end.
class ScratchDir {
 public:
  ScratchDir() {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    path_ = std::filesystem::temp_directory_path() /
            fmt::format("stagecraft_sim_{}_{}_{}", info->test_suite_name(), info->name(), ::getpid());
    std::filesystem::remove_all(path_);
    std::filesystem::create_directories(path_);
  }
  ~ScratchDir() { std::filesystem::remove_all(path_); }
  ScratchDir(const ScratchDir&) = delete;
  ScratchDir& operator=(const ScratchDir&) = delete;

  // Writes `text` to `name` (sub-directories created) and returns its path.
  std::string Write(const std::string& name, const std::string& text) const {
    const std::filesystem::path file = path_ / name;
    std::filesystem::create_directories(file.parent_path());
    std::ofstream(file) << text;
    return file.string();
  }
  std::string Path(const std::string& name) const { return (path_ / name).string(); }

 private:
  std::filesystem::path path_;
};

// The message of the stagecraft::InputError `fn` throws, or "" when it throws none.
template <class Fn>
std::string ErrorOf(Fn fn) {
  try {
    fn();
  } catch (const stagecraft::InputError& e) {
    return e.what();
  }
  return "";
}

// "line:col" (1-based) of the first occurrence of `needle` in `text`.
inline std::string PosOf(const std::string& text, const std::string& needle) {
  const size_t at = text.find(needle);
  EXPECT_NE(at, std::string::npos) << needle;
  if (at == std::string::npos) return "?";
  int line = 1;
  size_t line_start = 0;
  for (size_t i = 0; i < at; ++i) {
    if (text[i] == '\n') {
      ++line;
      line_start = i + 1;
    }
  }
  return fmt::format("{}:{}", line, at - line_start + 1);
}

// `text` with the first occurrence of `from` replaced by `to` (a failure when there is none).
inline std::string Replace(std::string text, const std::string& from, const std::string& to) {
  const size_t at = text.find(from);
  EXPECT_NE(at, std::string::npos) << from;
  if (at != std::string::npos) text.replace(at, from.size(), to);
  return text;
}

// A scenario on `ranks` devices of 2 GFLOP/s at efficiency 0.5 (one FLOP takes one ns) and 1
// GiB, 4 microbatches of `microbatch_size`, running `schedule`.
inline Scenario UnitScenario(int ranks, const std::string& schedule, int microbatch_size = 1) {
  Scenario s;
  s.name = "test";
  s.path = "test.yaml";
  s.topology.device = DeviceSpec::Flat("unit", 2e9, 1LL << 30, 0.5);
  s.topology.devices_per_node = ranks;
  s.pipeline.schedules = {schedule};
  s.pipeline.ranks = ranks;
  s.pipeline.microbatches = 4;
  s.pipeline.microbatch_size = microbatch_size;
  return s;
}

// A tiny MoE stage (moe_test, recompute_modules_test): b = 1, s = 4, h = 8, a = 2 (kv = h), GELU,
// 4 experts of 6, top-2, E = 2, bf16, one FLOP per ns, 2 ranks of 1 layer (both MoE), D = 2.
inline Scenario TinyMoeScenario() {
  Scenario s = UnitScenario(2, "gpipe", 1);
  TransformerSpec& t = s.model.transformer.emplace();
  t.layers = 2, t.hidden = 8, t.heads = 2, t.seq = 4, t.vocab = 10;
  t.moe = MoeSpec{.experts = 4, .top_k = 2, .expert_hidden = 6};
  s.training.dtype = Dtype::kBf16;
  s.pipeline.data_parallel = 2;
  s.pipeline.expert_parallel = 2;
  s.topology.devices_per_node = 4;
  return s;
}

// A scenario's YAML on one node of four 100-TFLOPS devices, a pipeline of 2 ranks, with
// `transformer` as model.transformer's map (its text, braces included).
inline std::string OneNodeTransformerYaml(const std::string& transformer) {
  return "name: t\n"
         "topology:\n"
         "  device: {name: gpu, peak: 100TFLOPS, memory: 80GiB, efficiency: 0.5}\n"
         "  nodes: 1\n"
         "  devices_per_node: 4\n"
         "  links: [{scope: node, bandwidth: 100GB/s, latency: 2us}]\n"
         "model:\n"
         "  transformer: " + transformer + "\n"
         "pipeline: {schedule: 1f1b, ranks: 2, microbatches: 4}\n";
}

// Writes `text` as scenario.yaml in `dir` and returns the error loading it gives ("" for none).
inline std::string LoadError(const ScratchDir& dir, const std::string& text,
                             const std::vector<std::string>& sets = {}) {
  const std::string path = dir.Write("scenario.yaml", text);
  return ErrorOf([&] { LoadScenario(path, sets); });
}

// The shipped scenarios (scenarios/*.yaml), by name.
inline std::vector<std::string> ShippedScenarios() {
  std::vector<std::string> paths;
  const std::filesystem::path root = std::filesystem::path(STAGECRAFT_SOURCE_DIR) / "scenarios";
  for (const auto& entry : std::filesystem::directory_iterator(root)) {
    if (entry.path().extension() == ".yaml") paths.push_back(entry.path().string());
  }
  std::sort(paths.begin(), paths.end());
  return paths;
}

// Reads the profile at `path` into `s` as LoadScenario reads model.profile, once.
inline void ReadProfileInto(Scenario* s, const std::string& path) {
  s->model.profile_path = path;
  s->model.profile = std::make_shared<const Profile>(LoadProfile(path));
}

inline bool StartsWith(const std::string& text, const std::string& prefix) {
  return text.compare(0, prefix.size(), prefix) == 0;
}

inline constexpr int64_t kUs = 1'000;
inline constexpr int64_t kMs = 1'000'000;

// `nodes` nodes of `devices` each: every device has a link of `bandwidth` (bytes/s) to its node
// switch, and one of `cluster_bandwidth` to the cluster switch when nodes > 1; a route through
// one switch costs that scope's latency.
inline Topology Node(int devices, double bandwidth = 100e9, int64_t latency_ns = 0, int nodes = 1,
                     double cluster_bandwidth = 10e9, int64_t cluster_latency_ns = 0) {
  TopologySpec spec;
  spec.device.name = "test";
  spec.device.peak_flops = 1e12;
  spec.device.memory_bytes = int64_t{1} << 40;
  spec.nodes = nodes;
  spec.devices_per_node = devices;
  spec.links.push_back({LinkScope::kNode, bandwidth, latency_ns});
  if (nodes > 1) spec.links.push_back({LinkScope::kCluster, cluster_bandwidth, cluster_latency_ns});
  return Topology(spec);
}

// Per-stage costs: forward f, input-grad bi, weight-grad bw (ns), no bytes unless given.
inline CostTable Uniform(int stages, int64_t f, int64_t bi, int64_t bw, int64_t send_bytes = 0) {
  CostTable t;
  StageCost c{};
  c.forward_ns = f;
  c.backward_input_ns = bi;
  c.backward_weight_ns = bw;
  c.send_bytes = send_bytes;
  t.stages.assign(stages, c);
  t.source = "test";
  return t;
}

// `costs` with these memory sizes (bytes) on every stage.
inline CostTable WithMemory(CostTable costs, int64_t activation, int64_t weight, int64_t grad, int64_t optimizer) {
  for (StageCost& c : costs.stages) {
    c.activation_bytes = activation;
    c.weight_bytes = weight;
    c.grad_bytes = grad;
    c.optimizer_bytes = optimizer;
  }
  return costs;
}

// The lowered schedule of a registered generator.
inline schedules::Schedule Make(const std::string& name, int p, int m, int steps = 1, int chunks = 1,
                                schedules::P2p p2p = schedules::P2p::kLockstep) {
  return schedules::Lower(schedules::Generate(name, schedules::test_cases::Params(p, m, steps, chunks)), p2p);
}

// Runs functions at given times on an event loop, for driving a unit by hand:
// script.At(500, [&] { ... }); loop.Run();
class Script final : public EventHandler {
 public:
  explicit Script(EventLoop* loop) : loop_(loop) {}
  void At(int64_t time_ns, std::function<void()> fn) {
    steps_.push_back(std::move(fn));
    loop_->ScheduleAt(time_ns, this, static_cast<int32_t>(steps_.size() - 1));
  }
  void OnEvent(const Event& event) override { steps_[event.a](); }

 private:
  EventLoop* loop_;
  std::vector<std::function<void()>> steps_;
};

}  // namespace stagecraft::sim::testing
