// The simulator prices copies between device and host memory (copy_streams.h), checked against
// timelines worked out by hand: one stage on one device, F 1 ms and B 2 ms per microbatch, 10 MB
// of activations per microbatch, and a host link of 100 GB/s each way with 0.1 ms of latency, so
// a copy alone takes 0.1 ms + 10 MB / 100 GB/s = 0.2 ms.
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "sim_test_util.h"
#include "stagecraft/schedules/bubble_split.h"
#include "stagecraft/schedules/metrics.h"
#include "stagecraft/schedules/offload.h"
#include "stagecraft/schedules/validate.h"
#include "stagecraft/sim/copy_streams.h"
#include "stagecraft/sim/engine.h"

namespace stagecraft::sim::testing {
namespace {

using schedules::Op;
using schedules::OpKind;
using schedules::Tensor;

constexpr int64_t kMb = 10'000'000;


Topology WithHost(int devices_per_node, int nodes = 1, double port_bandwidth = 0) {
  TopologySpec spec;
  spec.device = DeviceSpec::Flat("test", 1e12, int64_t{1} << 40, 0.5);
  spec.nodes = nodes;
  spec.devices_per_node = devices_per_node;
  spec.links.push_back({LinkScope::kNode, 100e9, 0});
  if (nodes > 1) spec.links.push_back({LinkScope::kCluster, 100e9, 0});
  spec.host = {.memory_bytes = int64_t{1} << 40, .bandwidth_bytes_per_s = 100e9, .latency_ns = 100'000};
  spec.host.device_bandwidth_bytes_per_s = port_bandwidth;
  return Topology(spec);
}

Op Copy(OpKind kind, int microbatch) {
  Op op;
  op.kind = kind;
  op.tensor = Tensor::kActivations;
  op.microbatch = microbatch;
  return op;
}

// GPipe on one rank, three microbatches, with microbatches 0 and 1 offloaded after their F and
// reloaded right before their B.
schedules::Schedule Offloaded() {
  schedules::Schedule s = Make("gpipe", 1, 3);
  std::vector<Op> ops;
  for (const Op& op : s.ops[0]) {
    if (op.kind == OpKind::kB && op.microbatch < 2) ops.push_back(Copy(OpKind::kReload, op.microbatch));
    ops.push_back(op);
    if (op.kind == OpKind::kF && op.microbatch < 2) ops.push_back(Copy(OpKind::kOffload, op.microbatch));
  }
  s.ops[0] = ops;
  return s;
}

TEST(CopyStreams, AHandWorkedOffloadAndReload) {
  const schedules::Schedule plain = Make("gpipe", 1, 3);
  ASSERT_EQ(schedules::test_cases::Actions(plain.ops[0], 3), "0F0 0F1 0F2 0B0 0B1 0B2 0STEP1");
  const schedules::Schedule s = Offloaded();
  ASSERT_EQ(schedules::test_cases::Actions(s.ops[0], 3),
            "0F0 0OFFLOAD_ACT0 0F1 0OFFLOAD_ACT1 0F2 0RELOAD_ACT0 0B0 0RELOAD_ACT1 0B1 0B2 0STEP1");
  ASSERT_TRUE(schedules::Validate(s).empty());
  const CostTable costs = WithMemory(Uniform(1, kMs, kMs, kMs), kMb, 0, 0, 0);
  const Topology machine = WithHost(1);
  SimConfig config;
  config.record_memory = true;
  const RunRecord r = Simulate(s, costs, machine, config);
  const auto& t = r.ranks[0].ops;
  const auto at = [](double ms) { return static_cast<int64_t>(ms * 1e6 + 0.5); };
  // F0 0-1; OFFLOAD 0 posted at F0's end: 0.1 ms latency, then 0.1 ms of bytes.
  EXPECT_EQ(t[0].end_ns, at(1));
  EXPECT_EQ(t[1].start_ns, at(1));
  EXPECT_EQ(t[1].end_ns, at(1.2));
  EXPECT_EQ(t[2].start_ns, at(1));  // F1 does not wait for the copy
  EXPECT_EQ(t[3].start_ns, at(2));
  EXPECT_EQ(t[3].end_ns, at(2.2));
  // F2 2-3; RELOAD 0 posted at its end, 3-3.2; B0 waits for it: 3.2-5.2.
  EXPECT_EQ(t[5].start_ns, at(3));
  EXPECT_EQ(t[5].end_ns, at(3.2));
  EXPECT_EQ(t[6].start_ns, at(3.2));
  EXPECT_EQ(t[6].end_ns, at(5.2));
  // RELOAD 1 posted at B0's end, 5.2-5.4; B1 5.4-7.4, B2 7.4-9.4.
  EXPECT_EQ(t[7].start_ns, at(5.2));
  EXPECT_EQ(t[7].end_ns, at(5.4));
  EXPECT_EQ(t[8].start_ns, at(5.4));
  EXPECT_EQ(t[9].end_ns, at(9.4));
  EXPECT_EQ(r.makespan_ns(), at(9.4));
  // Device: 2 activations at most (F1 starts while OFFLOAD 0 runs; F2 after it ended, while
  // OFFLOAD 1 runs; RELOAD 0 brings one back beside microbatch 2's), against 3 without copies.
  // Host: microbatches 0 and 1 from 2 ms (OFFLOAD 1's start) to 3.2 ms (RELOAD 0's end).
  EXPECT_EQ(r.ranks[0].peak_memory_bytes, 2 * kMb);
  EXPECT_EQ(Simulate(plain, costs, machine, config).ranks[0].peak_memory_bytes, 3 * kMb);
  EXPECT_EQ(r.ranks[0].peak_host_memory_bytes, 2 * kMb);
  ASSERT_EQ(r.node_peak_host_memory_bytes.size(), 1u);
  EXPECT_EQ(r.node_peak_host_memory_bytes[0], 2 * kMb);
  // The two 0.2 ms waits for a RELOAD are their own part of the split.
  const auto split = schedules::SplitBubbles(s, r, false);
  EXPECT_EQ(split[0].compute_ns, at(9));
  EXPECT_EQ(split[0].offload_wait_ns, at(0.4));
  EXPECT_EQ(split[0].wait_ns + split[0].transfer_ns + split[0].overhead_ns + split[0].idle_ns, 0);
  // Without copies the rank reports no host memory.
  EXPECT_EQ(Simulate(plain, costs, machine, config).ranks[0].peak_host_memory_bytes, -1);
}

// The same run on a device without a copy engine (a CPU core: DeviceSpec::copy_engine false,
// SimConfig::copies_hold_compute): each copy holds the compute, one at a time. F0 0-1, OFFLOAD 0
// 1-1.2, F1 1.2-2.2, OFFLOAD 1 2.2-2.4, F2 2.4-3.4, RELOAD 0 3.4-3.6, B0 3.6-5.6, RELOAD 1
// 5.6-5.8, B1 5.8-7.8, B2 7.8-9.8. The split: 0.4 ms waiting for reloads before the Bs, 0.4 ms
// of overhead before F1 and F2 (their inputs were there).
TEST(CopyStreams, WithoutACopyEngineCopiesHoldTheCompute) {
  const schedules::Schedule s = Offloaded();
  const CostTable costs = WithMemory(Uniform(1, kMs, kMs, kMs), kMb, 0, 0, 0);
  SimConfig config;
  config.copies_hold_compute = true;
  const RunRecord r = Simulate(s, costs, WithHost(1), config);
  const auto& t = r.ranks[0].ops;
  const auto at = [](double ms) { return static_cast<int64_t>(ms * 1e6 + 0.5); };
  const std::vector<std::pair<double, double>> want = {{0, 1},     {1, 1.2},   {1.2, 2.2}, {2.2, 2.4},
                                                       {2.4, 3.4}, {3.4, 3.6}, {3.6, 5.6}, {5.6, 5.8},
                                                       {5.8, 7.8}, {7.8, 9.8}};
  for (size_t i = 0; i < want.size(); ++i) {
    EXPECT_EQ(t[i].start_ns, at(want[i].first)) << i;
    EXPECT_EQ(t[i].end_ns, at(want[i].second)) << i;
  }
  EXPECT_EQ(r.makespan_ns(), at(9.8));
  const auto split = schedules::SplitBubbles(s, r, false);
  EXPECT_EQ(split[0].offload_wait_ns, at(0.4));
  EXPECT_EQ(split[0].overhead_ns, at(0.4));
}

// Two ranks on one node share its host link: copies that run together split it. GPipe on two
// ranks with nothing sent between them (send_bytes 0), 1 GB of activations per microbatch (10 ms
// alone on the host link): each rank offloads microbatch 0 after its F (rank 0 at 1 ms, rank 1 at
// 2 ms) and reloads it before its B. On two nodes each copy has a host link of its own.
TEST(CopyStreams, CopiesOfOneNodeShareItsHostLink) {
  schedules::Schedule s = Make("gpipe", 2, 2);
  for (auto& ops : s.ops) {
    for (size_t i = 0; i < ops.size(); ++i) {
      if (ops[i].kind == OpKind::kF && ops[i].microbatch == 0) {
        Op off = Copy(OpKind::kOffload, 0);
        off.stage = ops[i].stage;
        Op back = Copy(OpKind::kReload, 0);
        back.stage = ops[i].stage;
        ops.insert(ops.begin() + static_cast<long>(i) + 1, off);
        // Right before its B.
        for (size_t j = i + 2; j < ops.size(); ++j) {
          if (ops[j].kind == OpKind::kB && ops[j].microbatch == 0) {
            ops.insert(ops.begin() + static_cast<long>(j), back);
            break;
          }
        }
        break;
      }
    }
  }
  ASSERT_TRUE(schedules::Validate(s).empty());
  const CostTable costs = WithMemory(Uniform(2, kMs, kMs, kMs), 100 * kMb, 0, 0, 0);  // 1 GB: 10 ms alone
  SimConfig config;
  const auto offload_of = [&](const RunRecord& r, int rank) {
    for (size_t i = 0; i < s.ops[rank].size(); ++i) {
      if (s.ops[rank][i].kind == OpKind::kOffload) return r.ranks[rank].ops[i];
    }
    return schedules::OpTiming{};
  };
  // Two nodes: each copy alone, 0.1 ms + 10 ms after its F.
  const RunRecord apart = Simulate(s, costs, WithHost(1, 2), config);
  EXPECT_EQ(offload_of(apart, 0).start_ns, kMs);
  EXPECT_EQ(offload_of(apart, 0).end_ns, kMs + 100'000 + 10 * kMs);
  EXPECT_EQ(offload_of(apart, 1).start_ns, 2 * kMs);
  EXPECT_EQ(offload_of(apart, 1).end_ns, 2 * kMs + 100'000 + 10 * kMs);
  // One node: rank 0's bytes alone 1.1-2.1 ms (1 ms: 100 MB), both from 2.1 at 50 GB/s each: rank
  // 0's last 900 MB end at 2.1 + 18 = 20.1 ms; rank 1 has moved 900 MB by then, its last 100 MB
  // alone take 1 ms more: 21.1 ms.
  const RunRecord shared = Simulate(s, costs, WithHost(2), config);
  EXPECT_EQ(offload_of(shared, 0).end_ns, 20'100'000);
  EXPECT_EQ(offload_of(shared, 1).end_ns, 21'100'000);
  ASSERT_EQ(shared.node_peak_host_memory_bytes.size(), 1u);
  EXPECT_EQ(shared.node_peak_host_memory_bytes[0], 200 * kMb);
  // Each device's own port at 25 GB/s (topology.host.device_bandwidth) under the node's 100: the
  // ports bind, alone or both at once: 0.1 ms + 1 GB / 25 GB/s = 40.1 ms after each F.
  const RunRecord ported = Simulate(s, costs, WithHost(2, 1, 25e9), config);
  EXPECT_EQ(offload_of(ported, 0).end_ns, 41'100'000);
  EXPECT_EQ(offload_of(ported, 1).end_ns, 42'100'000);
  EXPECT_DOUBLE_EQ(CopyAloneNs(WithHost(2, 1, 25e9), 0, 100 * kMb), 100'000 + 40e6);
  EXPECT_DOUBLE_EQ(CopyAloneNs(WithHost(2), 0, 100 * kMb), 100'000 + 10e6);
  ASSERT_EQ(apart.node_peak_host_memory_bytes.size(), 2u);
  EXPECT_EQ(apart.node_peak_host_memory_bytes[0], 100 * kMb);
  EXPECT_EQ(apart.node_peak_host_memory_bytes[1], 100 * kMb);
}

// Spilled weights (schedules::PlaceWeightSpill) on interleaved 1F1B, 2 ranks x 2 chunks, 2
// microbatches: 10 MB of weights, 10 MB of gradients and 20 MB of optimizer state per stage, so a
// weight copy moves 20 MB and an optimizer copy 20 MB. Rank 0's first F waits for its stage's
// weights, whose copy shares the node's host link with rank 1's first: 0.1 ms + 20 MB at 50 GB/s
// = 0.5 ms. Everything starts on the host: 2 stages x 40 MB per rank. Without double buffering
// the device holds less than without spilling; double buffering is never slower.
TEST(CopyStreams, SpilledWeightsStartOnTheHost) {
  const schedules::Schedule plain = Make("interleaved", 2, 2, 1, 2);
  const CostTable costs = WithMemory(Uniform(4, kMs, kMs, kMs), kMb, kMb, kMb, 2 * kMb);
  const Topology machine = WithHost(2);
  SimConfig config;
  const RunRecord base = Simulate(plain, costs, machine, config);
  const RunRecord lone = Simulate(schedules::PlaceWeightSpill(plain, {.double_buffer = false}), costs, machine, config);
  const RunRecord both = Simulate(schedules::PlaceWeightSpill(plain, {.double_buffer = true}), costs, machine, config);
  const schedules::Schedule s = schedules::PlaceWeightSpill(plain, {.double_buffer = false});
  ASSERT_EQ(s.ops[0][0].kind, OpKind::kReload);
  ASSERT_EQ(s.ops[0][1].kind, OpKind::kF);
  EXPECT_EQ(lone.ranks[0].ops[0].end_ns, 500'000);
  EXPECT_EQ(lone.ranks[0].ops[1].start_ns, 500'000);
  for (const RunRecord* r : {&lone, &both}) {
    EXPECT_GE(r->ranks[0].peak_host_memory_bytes, 2 * 4 * kMb);
    EXPECT_GT(r->makespan_ns(), base.makespan_ns());
  }
  EXPECT_LT(lone.ranks[0].peak_memory_bytes, base.ranks[0].peak_memory_bytes);
  EXPECT_LE(both.makespan_ns(), lone.makespan_ns());
  // Double buffered, the next visit's stage comes in over the whole visit before: with two stages
  // a rank, both are on the device most of the time, as without spilling.
  EXPECT_GE(both.ranks[0].peak_memory_bytes, lone.ranks[0].peak_memory_bytes) << "two stages' weights at once";
  EXPECT_LE(both.ranks[0].peak_memory_bytes, base.ranks[0].peak_memory_bytes);
}

TEST(CopyStreams, ACopyWithoutAHostIsRefusedInOneLine) {
  const schedules::Schedule s = Offloaded();
  const std::string error = ErrorOf([&] { Simulate(s, Uniform(1, kMs, kMs, kMs), Node(1), SimConfig{}); });
  EXPECT_EQ(error,
            "device 0 copies to host memory but its node has no host: state topology.host (memory, bandwidth, latency) "
            "on a topology of nodes and devices");
}

TEST(CopyStreams, CopyBytesByTensor) {
  StageCost c{};
  c.activation_bytes = 1;
  c.weight_bytes = 2;
  c.optimizer_bytes = 3;
  c.grad_bytes = 4;
  EXPECT_EQ(CopyBytes(c, Tensor::kActivations), 1);
  EXPECT_EQ(CopyBytes(c, Tensor::kWeights), 6);  // with the gradients
  EXPECT_EQ(CopyBytes(c, Tensor::kOptimizer), 3);
  EXPECT_EQ(CopyAloneNs(WithHost(1), 0, kMb), 200'000);
}

}  // namespace
}  // namespace stagecraft::sim::testing
