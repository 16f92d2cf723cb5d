// pipeline.offload through the harness: a fraction of each stage's activations becomes copies in
// every schedule built (schedules/offload.h) and the simulator prices them; the policies not
// priced yet, and host memory too small for what the copies hold, are refused in one line naming
// the key.
#include <algorithm>
#include <string>
#include <vector>

#include <fmt/format.h>

#include <gtest/gtest.h>

#include "stagecraft/base/error.h"
#include "stagecraft/harness/predict.h"
#include "stagecraft/schedules/metrics_json.h"
#include "stagecraft/sim/scenario_checks.h"
#include "stagecraft/sim/topology.h"

namespace stagecraft::harness {
namespace {

const std::string kText =
    "name: offload\n"
    "topology:\n"
    "  device: {name: unit, peak: 1TFLOPS, memory: 16GiB, efficiency: 0.5}\n"
    "  nodes: 1\n"
    "  devices_per_node: 2\n"
    "  host: {memory: 256GiB, bandwidth: 32GB/s, latency: 2us}\n"
    "  links: [{scope: node, bandwidth: 100GB/s, latency: 1us}]\n"
    "model:\n"
    "  mlp: {layers: 4, hidden: 1024}\n"
    "pipeline: {schedule: gpipe, ranks: 2, microbatches: 8, microbatch_size: 64}\n";

std::string ErrorOf(const std::string& set) {
  try {
    const sim::Scenario sc = sim::LoadScenarioFromText(kText, "offload.yaml", {set});
    for (const auto& s : ScenarioSchedules(sc, sc.pipeline.schedules)) Predict(sc, sim::Topology(sc.topology), s);
  } catch (const InputError& e) {
    return e.what();
  }
  return "";
}

TEST(OffloadPredict, EveryPolicyIsPriced) {
  EXPECT_EQ(ErrorOf("pipeline.offload.weights=spill"), "");
  EXPECT_EQ(ErrorOf("pipeline.offload.activations=0.5"), "");
  // The host's step runs at its DRAM's bandwidth, which this GPU-like device's host must state.
  EXPECT_NE(ErrorOf("pipeline.offload.optimizer=host").find("topology.host: pipeline.offload.optimizer: host runs each "
                                                            "optimizer step on the host's CPU"),
            std::string::npos)
      << ErrorOf("pipeline.offload.optimizer=host");
}

Prediction PredictWith(const std::string& set) {
  const sim::Scenario sc = sim::LoadScenarioFromText(kText, "offload.yaml", {set});
  return Predict(sc, sim::Topology(sc.topology), ScenarioSchedules(sc, sc.pipeline.schedules).front());
}

// GPipe holds all 8 microbatches on rank 0 before its first B; offloading half of them leaves at
// least 4 on the device (an offload frees it only when done) and at most 4 on the host.
TEST(OffloadPredict, HalfTheActivationsMoveToTheHost) {
  const Prediction plain = PredictWith("pipeline.offload.activations=0");
  const Prediction half = PredictWith("pipeline.offload.activations=0.5");
  EXPECT_EQ(schedules::FirstCopy(plain.schedule), "");
  ASSERT_NE(schedules::FirstCopy(half.schedule), "");
  const int64_t act = plain.costs.stages[0].activation_bytes;
  ASSERT_GT(act, 0);
  const auto& p0 = plain.metrics.ranks_detail[0];
  const auto& h0 = half.metrics.ranks_detail[0];
  EXPECT_EQ(p0.peak_host_memory_bytes, -1);
  EXPECT_GT(h0.peak_host_memory_bytes, 0);
  EXPECT_LE(h0.peak_host_memory_bytes, 4 * act);
  EXPECT_EQ(h0.peak_host_memory_bytes % act, 0);
  EXPECT_LT(h0.peak_memory_bytes, p0.peak_memory_bytes);
  EXPECT_GE(h0.peak_memory_bytes, p0.peak_memory_bytes - 4 * act);
  EXPECT_GE(half.metrics.makespan_ms, plain.metrics.makespan_ms);
  ASSERT_EQ(half.result.node_peak_host_memory_bytes.size(), 1u);
  EXPECT_GE(half.result.node_peak_host_memory_bytes[0], h0.peak_host_memory_bytes);
  // The seven parts of the split still sum to the makespan on every rank.
  for (const auto& r : half.metrics.ranks_detail) {
    EXPECT_NEAR(r.compute_ms + r.wait_ms + r.transfer_ms + r.collective_ms + r.offload_wait_ms + r.overhead_ms +
                    r.idle_ms,
                half.metrics.makespan_ms, 1e-6);
  }
  // The JSON says so only for a run with copies.
  const std::string with = schedules::ScheduleMetricsToJson(half.metrics);
  const std::string without = schedules::ScheduleMetricsToJson(plain.metrics);
  EXPECT_NE(with.find("\"peak_host_memory_bytes\":"), std::string::npos);
  EXPECT_NE(with.find("\"offload_wait_ms\":"), std::string::npos);
  EXPECT_EQ(without.find("peak_host_memory_bytes"), std::string::npos);
  EXPECT_EQ(without.find("offload_wait_ms"), std::string::npos);
}

int StageZeroOffloads(const schedules::Schedule& s) {
  int n = 0;
  for (const auto& ops : s.ops) {
    for (const schedules::Op& op : ops) n += op.kind == schedules::OpKind::kOffload && op.stage == 0 ? 1 : 0;
  }
  return n;
}

// auto: the most microbatches per stage whose copies keep the step within 0.5% of the one
// without them: all 8 over a host link copies cross in no time, none over one of 1 MB/s, and in
// between a k whose k + 1 would cost more (checked by stating that fraction).
TEST(OffloadPredict, AutoOffloadsWhatTheIdleTimeHides) {
  const auto predict = [](const std::vector<std::string>& sets) {
    const sim::Scenario sc = sim::LoadScenarioFromText(kText, "offload.yaml", sets);
    return Predict(sc, sim::Topology(sc.topology), ScenarioSchedules(sc, sc.pipeline.schedules).front());
  };
  const double base = predict({}).metrics.makespan_ms;
  const Prediction fast = predict({"pipeline.offload.activations=auto", "topology.host.bandwidth=1PB/s",
                                   "topology.host.latency=0"});
  EXPECT_EQ(StageZeroOffloads(fast.schedule), 8);
  const Prediction slow = predict({"pipeline.offload.activations=auto", "topology.host.bandwidth=1MB/s"});
  EXPECT_EQ(StageZeroOffloads(slow.schedule), 0);
  for (const char* bandwidth : {"topology.host.bandwidth=4GB/s", "topology.host.bandwidth=16GB/s"}) {
    SCOPED_TRACE(bandwidth);
    const Prediction mid = predict({"pipeline.offload.activations=auto", bandwidth});
    const int k = StageZeroOffloads(mid.schedule);
    EXPECT_LE(mid.metrics.makespan_ms, base * 1.005);
    if (k < 8) {
      const Prediction more = predict({fmt::format("pipeline.offload.activations={}", (k + 1) / 8.0), bandwidth});
      EXPECT_EQ(StageZeroOffloads(more.schedule), k + 1);
      EXPECT_GT(more.metrics.makespan_ms, base * 1.005);
    }
  }
}

TEST(OffloadPredict, HostMemoryTooSmallIsRefusedByItsKey) {
  const sim::Scenario sc = sim::LoadScenarioFromText(
      kText, "offload.yaml", {"pipeline.offload.activations=1", "topology.host.memory=1MiB"});
  const std::string error = [&] {
    try {
      Predict(sc, sim::Topology(sc.topology), ScenarioSchedules(sc, sc.pipeline.schedules).front());
    } catch (const InputError& e) {
      return std::string(e.what());
    }
    return std::string();
  }();
  EXPECT_EQ(error.rfind("offload.yaml: topology.host.memory: gpipe holds up to ", 0), 0u) << error;
  EXPECT_NE(error.find("in node 0's host memory (its ranks' offloaded tensors), more than the 1.00 MiB stated"),
            std::string::npos)
      << error;
}

// optimizer: host (ZeRO-Offload) by hand: 4 layers of 1024 x 1024 + 1024 on 2 ranks, 2 layers a
// stage: W = G = 2 x 1,049,600 x 4 bytes, Adam's O = 2 W. A STEP takes the gradients down the host
// link (2 us + G / 32 GB/s), the host's update (2 W + G + 2 O bytes at 100 GB/s) and the weights
// back (2 us + W / 32 GB/s); the device holds no optimizer state and the host W + G + O per stage.
TEST(OffloadPredict, TheOptimizerOnTheHostByHand) {
  const std::string bw = "topology.host.memory_bandwidth=100GB/s";
  const auto predict = [&](const std::string& place) {
    const sim::Scenario sc = sim::LoadScenarioFromText(
        kText + "training: {optimizer: adam, lr: 0.001}\n", "offload.yaml", {bw, "pipeline.offload.optimizer=" + place});
    return Predict(sc, sim::Topology(sc.topology), ScenarioSchedules(sc, sc.pipeline.schedules).front());
  };
  const Prediction device = predict("device");
  const Prediction host = predict("host");
  const double w = 2.0 * (1024 * 1024 + 1024) * 4;
  ASSERT_EQ(host.costs.stages[0].weight_bytes, static_cast<int64_t>(w));
  ASSERT_EQ(host.costs.stages[0].optimizer_bytes, static_cast<int64_t>(2 * w));
  const double step_ns = (2e3 + w / 32e9 * 1e9) + (2 * w + w + 4 * w) / 100e9 * 1e9 + (2e3 + w / 32e9 * 1e9);
  for (size_t r = 0; r < host.schedule.ops.size(); ++r) {
    SCOPED_TRACE(r);
    const auto& ops = host.schedule.ops[r];
    const auto step = std::find_if(ops.begin(), ops.end(), [](const schedules::Op& op) {
      return op.kind == schedules::OpKind::kStep;
    });
    ASSERT_NE(step, ops.end());
    const schedules::OpTiming& t = host.result.ranks[r].ops[static_cast<size_t>(step - ops.begin())];
    EXPECT_NEAR(static_cast<double>(t.end_ns - t.start_ns), step_ns, 2.0);
    const auto& d = device.metrics.ranks_detail[r];
    const auto& h = host.metrics.ranks_detail[r];
    EXPECT_EQ(d.peak_memory_bytes - h.peak_memory_bytes, static_cast<int64_t>(2 * w));
    EXPECT_EQ(d.peak_host_memory_bytes, -1);
    EXPECT_EQ(h.peak_host_memory_bytes, static_cast<int64_t>(4 * w));
    EXPECT_EQ(MemoryTermsOf(host, static_cast<int>(r)).optimizer, 0);
  }
  EXPECT_EQ(host.result.node_peak_host_memory_bytes.at(0), static_cast<int64_t>(8 * w));
  // The memory it frees is the state's; the time it costs is its STEPs' (here on the critical
  // path of the last one).
  EXPECT_GT(host.metrics.makespan_ms, device.metrics.makespan_ms);
}

}  // namespace
}  // namespace stagecraft::harness
