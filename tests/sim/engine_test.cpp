// The engine against closed forms from the papers, hand-worked transfers, and the IR analysis.
#include "stagecraft/sim/engine.h"

#include <algorithm>
#include <cmath>
#include <string>

#include <gtest/gtest.h>

#include "stagecraft/schedules/analysis.h"
#include "stagecraft/schedules/generators.h"
#include "stagecraft/schedules/lower.h"
#include "stagecraft/sim/metrics.h"

namespace stagecraft::sim {
namespace {

using schedules::GeneratorParams;
using schedules::Schedule;

constexpr int64_t kMs = 1'000'000;

Schedule Make(const std::string& name, int p, int m, int steps = 1, int chunks = 1) {
  GeneratorParams params;
  params.ranks = p;
  params.microbatches = m;
  params.steps = steps;
  params.chunks = chunks;
  return schedules::Lower(schedules::Generate(name, params));
}

// One node of `devices`, links of the given bandwidth and latency.
Topology Node(int devices, double bandwidth = 100e9, int64_t latency_ns = 0, int nodes = 1,
              double cluster_bandwidth = 10e9, int64_t cluster_latency_ns = 0) {
  TopologySpec spec;
  spec.device.name = "test";
  spec.device.peak_flops = 1e12;
  spec.device.memory_bytes = int64_t{1} << 40;
  spec.nodes = nodes;
  spec.devices_per_node = devices;
  spec.links.push_back({"node", bandwidth, latency_ns});
  if (nodes > 1) spec.links.push_back({"cluster", cluster_bandwidth, cluster_latency_ns});
  return Topology(spec);
}

// Per-stage costs: forward f, input-grad bi, weight-grad bw (ns), no bytes unless given.
CostTable Uniform(int stages, int64_t f, int64_t bi, int64_t bw, int64_t send_bytes = 0) {
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

ScheduleMetrics SimMetrics(const Schedule& s, const CostTable& costs, const Topology& topo) {
  return ComputeMetrics(s, Simulate(s, costs, topo, SimConfig{}), 1);
}

// Acceptance: GPipe and 1F1B with F = 1, B = 2, 4 ranks, 8 microbatches, no communication:
// makespan 33 and bubble 3/11.
TEST(Engine, GpipeAndOneFOneBUniformCost) {
  for (const char* name : {"gpipe", "1f1b"}) {
    const auto m = SimMetrics(Make(name, 4, 8), Uniform(4, kMs, kMs, kMs), Node(4));
    EXPECT_EQ(m.makespan_ns, 33 * kMs) << name;
    EXPECT_NEAR(m.bubble_fraction, 3.0 / 11.0, 1e-12) << name;
  }
}

// GPipe (Huang et al. 2019): bubble (p-1)/(m+p-1) at uniform cost, to 1e-9.
TEST(Engine, GpipeBubbleClosedForm) {
  for (int p : {1, 2, 3, 5, 8, 16}) {
    for (int m : {1, 2, 7, 16, 32}) {
      const auto metrics = SimMetrics(Make("gpipe", p, m), Uniform(p, 3 * kMs, 2 * kMs, 5 * kMs), Node(p));
      EXPECT_NEAR(metrics.bubble_fraction, static_cast<double>(p - 1) / (m + p - 1), 1e-9) << "p=" << p << " m=" << m;
    }
  }
}

// Megatron-LM §2.2.2: interleaving v chunks, m a multiple of p, leaves (p-1)(t_f + t_b)/v of
// idle time on every rank (t_f, t_b: one rank's whole forward / backward per microbatch).
TEST(Engine, InterleavedBubbleShrinksByChunks) {
  const int64_t tf = 12 * kMs, tb = 24 * kMs;
  for (int p : {2, 4, 8}) {
    for (int v : {2, 3, 4}) {
      for (int m : {p, 2 * p, 4 * p}) {
        const Schedule s = Make("interleaved", p, m, 1, v);
        const auto metrics = SimMetrics(s, Uniform(p * v, tf / v, tb / (2 * v), tb / (2 * v)), Node(p));
        for (const auto& r : metrics.ranks_detail) {
          const double idle_ms = metrics.makespan_ms - r.busy_ms;
          EXPECT_NEAR(idle_ms, (p - 1) * (tf + tb) * 1e-6 / v, 1e-6) << "p=" << p << " v=" << v << " m=" << m;
        }
      }
    }
  }
}

// Zero Bubble (Qi et al. 2024, Table 2): at zero communication cost ZB-H1 idles
// (p-1)(T_F + T_B - T_W) on every rank over the makespan, and ZB-H2 (p-1)(T_F + T_B - 2T_W)
// over the largest per-rank span (each rank measured from its first forward; Appendix G).
TEST(Engine, ZeroBubbleClosedForms) {
  struct Costs { int64_t f, b, w; };
  for (const Costs c : {Costs{kMs, kMs, kMs}, Costs{2 * kMs, 2 * kMs, 2 * kMs}}) {
    for (int p : {2, 4, 8}) {
      for (int m : {2 * p, 3 * p}) {
        const auto h1 = SimMetrics(Make("zb-h1", p, m), Uniform(p, c.f, c.b, c.w), Node(p));
        const double expected_h1 = (p - 1) * (c.f + c.b - c.w) * 1e-6 / h1.makespan_ms;
        EXPECT_NEAR(h1.bubble_fraction, expected_h1, 1e-9) << "zb-h1 p=" << p << " m=" << m;

        const auto h2 = SimMetrics(Make("zb-h2", p, m), Uniform(p, c.f, c.b, c.w), Node(p));
        double largest_span = 0;
        for (const auto& r : h2.ranks_detail) largest_span = std::max(largest_span, r.span_ms);
        for (const auto& r : h2.ranks_detail) {
          const double idle_in_span = largest_span - r.busy_ms;
          EXPECT_NEAR(idle_in_span / largest_span, (p - 1) * (c.f + c.b - 2 * c.w) * 1e-6 / largest_span, 1e-9)
              << "zb-h2 p=" << p << " m=" << m << " rank " << r.rank;
        }
      }
    }
  }
}

// Memory: activation A per stashed microbatch, weights Wt x live versions, gradients G and
// optimizer state O; the simulated peak equals the IR analysis to the byte.
TEST(Engine, PeakMemoryEqualsIrAnalysis) {
  const int64_t a = 3'000'001, wt = 50'000'017, g = 7'000'003, o = 11'000'009;
  for (const char* name : {"gpipe", "1f1b", "zb-h1", "zb-h2", "interleaved"}) {
    const int chunks = std::string(name) == "interleaved" ? 2 : 1;
    const Schedule s = Make(name, 4, 8, 2, chunks);
    CostTable costs = Uniform(s.stages(), kMs, kMs, kMs);
    for (auto& c : costs.stages) {
      c.activation_bytes = a;
      c.weight_bytes = wt;
      c.grad_bytes = g;
      c.optimizer_bytes = o;
    }
    const SimResult result = Simulate(s, costs, Node(4), SimConfig{});
    const auto analysis = schedules::Analyze(s);
    for (int r = 0; r < 4; ++r) {
      const int64_t expected = analysis[r].peak_inflight * a + chunks * (wt * analysis[r].peak_weight_versions + g + o);
      EXPECT_EQ(result.ranks[r].peak_memory_bytes, expected) << name << " rank " << r;
      EXPECT_EQ(result.ranks[r].peak_inflight, analysis[r].peak_inflight) << name;
    }
  }
}

// Weight versions over time agree with the IR analysis for the asynchronous schedules.
TEST(Engine, WeightVersionsMatchIrAnalysis) {
  for (const char* name : {"pipedream", "2bw"}) {
    const Schedule s = Make(name, 4, 8, 3);
    const SimResult result = Simulate(s, Uniform(4, kMs, kMs, kMs), Node(4), SimConfig{});
    const auto analysis = schedules::Analyze(s);
    for (int r = 0; r < 4; ++r) {
      EXPECT_EQ(result.ranks[r].peak_weight_versions, analysis[r].peak_weight_versions) << name << " rank " << r;
    }
  }
}

// Two transfers over one link take twice as long as one. Forwards cost nothing, so with two
// microbatches both activations leave rank 0 at t = 0 and share its link.
TEST(Engine, LinkSharedByTwoTransfersTakesTwiceAsLong) {
  const int64_t bytes = 100'000'000;  // 1 ms at 100 GB/s
  const double bandwidth = 100e9;
  auto recv_end = [&](int m) {
    const Schedule s = Make("gpipe", 2, m);
    const SimResult r = Simulate(s, Uniform(2, 0, kMs, kMs, bytes), Node(2, bandwidth, 0), SimConfig{});
    int64_t last = 0;
    for (size_t i = 0; i < s.ops[1].size(); ++i) {
      if (s.ops[1][i].kind == schedules::OpKind::kRecvF) last = std::max(last, r.timing[1][i].end_ns);
    }
    return last;
  };
  // Route: device -> node switch -> device, both links of 100 GB/s.
  EXPECT_EQ(recv_end(1), kMs);
  EXPECT_EQ(recv_end(2), 2 * kMs);
}

// Crossing the slower inter-node link. Transfers are rendezvous (they start once both ends
// are posted) and the lock-step lowering posts rank r's RECV for microbatch k+1 after its
// forward k, so in GPipe every microbatch's hop across the boundary sits on the critical path,
// forward and backward: a step grows by 2 m (t_cluster - t_node), t = latency + bytes/bandwidth.
TEST(Engine, InterNodeLinkRaisesStepTimeByThePredictedAmount) {
  const int64_t bytes = 10'000'000, node_latency = 2'000, cluster_latency = 5'000;
  const double node_bw = 400e9, cluster_bw = 50e9;
  const int m = 8;
  const Schedule s = Make("gpipe", 4, m, 2);
  const CostTable costs = Uniform(4, 2 * kMs, 2 * kMs, 2 * kMs, bytes);
  const auto one_node = SimMetrics(s, costs, Node(4, node_bw, node_latency));
  const auto two_nodes = SimMetrics(s, costs, Node(2, node_bw, node_latency, 2, cluster_bw, cluster_latency));
  const auto transfer_ns = [](double bw, int64_t latency, int64_t n) { return latency + std::llround(n * 1e9 / bw); };
  const int64_t per_step = 2 * m * (transfer_ns(cluster_bw, cluster_latency, bytes) - transfer_ns(node_bw, node_latency, bytes));
  EXPECT_NEAR(two_nodes.makespan_ns - one_node.makespan_ns, 2 * per_step, 4);
  EXPECT_NEAR(two_nodes.step_time_ms - one_node.step_time_ms, per_step * 1e-6, 1e-5);
  // One microbatch: the hop is crossed once each way.
  const Schedule single = Make("gpipe", 4, 1, 1);
  const auto a = SimMetrics(single, costs, Node(4, node_bw, node_latency));
  const auto b = SimMetrics(single, costs, Node(2, node_bw, node_latency, 2, cluster_bw, cluster_latency));
  EXPECT_EQ(b.makespan_ns - a.makespan_ns,
            2 * (transfer_ns(cluster_bw, cluster_latency, bytes) - transfer_ns(node_bw, node_latency, bytes)));
}

TEST(Engine, Deterministic) {
  const Schedule s = Make("zb-h1", 4, 8, 2);
  const CostTable costs = Uniform(4, kMs, kMs, kMs, 1'000'000);
  const auto a = BuildTrace(s, Simulate(s, costs, Node(4, 10e9, 1000), SimConfig{}), "x", "predicted", "{}");
  const auto b = BuildTrace(s, Simulate(s, costs, Node(4, 10e9, 1000), SimConfig{}), "x", "predicted", "{}");
  EXPECT_EQ(schedules::TraceToJson(a), schedules::TraceToJson(b));
}

}  // namespace
}  // namespace stagecraft::sim
