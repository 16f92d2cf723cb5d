// Tests for sim/src/engine.cpp: the engine against closed forms from the papers, hand-worked
// transfers and step costs, and, for every generator in the table, the IR analysis.
#include "stagecraft/sim/engine.h"

#include <algorithm>
#include <cmath>
#include <string>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

#include "sim_test_util.h"
#include "stagecraft/schedules/analysis.h"
#include "stagecraft/schedules/bubble_split.h"
#include "stagecraft/schedules/generators.h"
#include "stagecraft/schedules/metrics.h"
#include "stagecraft/schedules/trace.h"

namespace stagecraft::sim {
namespace {

using schedules::ComputeMetrics;
using schedules::GeneratorInfo;
using schedules::OpKind;
using schedules::Schedule;
using schedules::ScheduleMetrics;
using testing::kMs;
using testing::kUs;
using testing::Make;
using testing::Node;
using testing::Uniform;

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

// DeepSeek-V3 report, Table 2: DualPipe (and its V variant) idles (PP/2 - 1)(F&B + B - 3W) per
// device and holds PP + 1 stage activations, PP = 2p stages. Its figures assume chunks of equal
// cost; here F = I = W per stage, B = I + W, and an overlapped pair on one stream costs
// F&B = F + B, its outputs leaving when it ends. (With unequal costs the engine's idle time
// departs from the closed form, which the report derives for its own timing of F&B.)
TEST(Engine, DualPipeVClosedForm) {
  for (const int64_t c : {kMs, 3 * kMs}) {
    for (int p : {2, 3, 4, 8}) {
      for (int m : {2 * p, 3 * p + 1}) {
        const auto metrics = SimMetrics(Make("dualpipe-v", p, m, 1, 2), Uniform(2 * p, c, c, c), Node(p));
        const double f = c * 1e-6, b = 2 * f, w = f, fb = f + b;
        for (const auto& r : metrics.ranks_detail) {
          EXPECT_NEAR(metrics.makespan_ms - r.busy_ms, (p - 1) * (fb + b - 3 * w), 1e-9)
              << "p=" << p << " m=" << m << " rank " << r.rank;
          EXPECT_EQ(r.peak_inflight_microbatches, 2 * p + 1) << "p=" << p << " m=" << m;
        }
      }
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
    const RunRecord r = Simulate(s, Uniform(2, 0, kMs, kMs, bytes), Node(2, bandwidth, 0), SimConfig{});
    int64_t last = 0;
    for (size_t i = 0; i < s.ops[1].size(); ++i) {
      if (s.ops[1][i].kind == schedules::OpKind::kRecvF) last = std::max(last, r.ranks[1].ops[i].end_ns);
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

// The same pipeline with receives posted ahead (schedules/lower.h): rank 2 has posted the
// receive of microbatch k long before rank 1 sends it, so each transfer starts at its send and
// overlaps the next forward; only the first hop each way is on the critical path, and a step
// grows by 2 (t_cluster - t_node) whatever m is.
TEST(Engine, ReceivesAheadPayTheSlowHopOncePerDirection) {
  const int64_t bytes = 10'000'000, node_latency = 2'000, cluster_latency = 5'000;
  const double node_bw = 400e9, cluster_bw = 50e9;
  const auto transfer_ns = [](double bw, int64_t latency, int64_t n) { return latency + std::llround(n * 1e9 / bw); };
  const int64_t hop = transfer_ns(cluster_bw, cluster_latency, bytes) - transfer_ns(node_bw, node_latency, bytes);
  const CostTable costs = Uniform(4, 2 * kMs, 2 * kMs, 2 * kMs, bytes);
  for (int m : {1, 8}) {
    const Schedule s = Make("gpipe", 4, m, 2, 1, schedules::P2p::kAhead);
    const auto one_node = SimMetrics(s, costs, Node(4, node_bw, node_latency));
    const auto two_nodes = SimMetrics(s, costs, Node(2, node_bw, node_latency, 2, cluster_bw, cluster_latency));
    EXPECT_NEAR(two_nodes.makespan_ns - one_node.makespan_ns, 2 * 2 * hop, 4) << "m=" << m;
  }
}

// The bubble split by hand: GPipe, 2 ranks, 2 microbatches, F = 1 ms, B = 2 ms, every hop
// 0.5 ms, receives ahead. Rank 1: F0 [1.5, 2.5], F1 [2.5, 3.5], B0 [3.5, 5.5], B1 [5.5, 7.5].
// Rank 0: F0 [0, 1], F1 [1, 2], then B0's gradient leaves rank 1 at 5.5 and arrives at 6:
// wait [2, 5.5], transfer [5.5, 6], B0 [6, 8], B1 [8, 10]. Rank 1 idles 1.5 ms before its
// first op and 2.5 ms after its last.
TEST(Engine, BubbleSplitHandWorked) {
  const Schedule s = Make("gpipe", 2, 2, 1, 1, schedules::P2p::kAhead);
  const auto m = SimMetrics(s, Uniform(2, kMs, kMs, kMs), Node(2, 100e9, kMs / 2));
  ASSERT_EQ(m.makespan_ns, 10 * kMs);
  const auto& r0 = m.ranks_detail[0];
  const auto& r1 = m.ranks_detail[1];
  EXPECT_DOUBLE_EQ(r0.compute_ms, 6);
  EXPECT_DOUBLE_EQ(r0.wait_ms, 3.5);
  EXPECT_DOUBLE_EQ(r0.transfer_ms, 0.5);
  EXPECT_DOUBLE_EQ(r0.overhead_ms, 0);
  EXPECT_DOUBLE_EQ(r0.idle_ms, 0);
  EXPECT_DOUBLE_EQ(r1.compute_ms, 6);
  EXPECT_DOUBLE_EQ(r1.wait_ms + r1.transfer_ms + r1.overhead_ms, 0);
  EXPECT_DOUBLE_EQ(r1.idle_ms, 4);
}

// ---- optimizer step cost ---------------------------------------------------------------
// A STEP with step_ns > 0 holds its rank's compute stream (DESIGN.md §4). Hand-worked timelines
// in units of u = 1 us, F = 1, B = 2 (I = W = 1), no bytes and zero latency, so a transfer
// arrives the moment both of its ends are posted (rendezvous). "r0 X [a, b]": rank 0 runs X
// from a to b.

CostTable WithStep(CostTable costs, int64_t step_ns) {
  for (auto& c : costs.stages) c.step_ns = step_ns;
  return costs;
}

using Spans = std::vector<std::pair<int64_t, int64_t>>;

// [start, end] of every STEP op of `rank`, in IR order.
Spans StepSpans(const Schedule& s, const RunRecord& result, int rank) {
  Spans spans;
  for (size_t i = 0; i < s.ops[rank].size(); ++i) {
    if (s.ops[rank][i].kind != schedules::OpKind::kStep) continue;
    spans.emplace_back(result.ranks[rank].ops[i].start_ns, result.ranks[rank].ops[i].end_ns);
  }
  return spans;
}

// One rank, m = 2, S = 5. GPipe: F0 [0,1] F1 [1,2] B0 [2,4] B1 [4,6] STEP [6,11]; 1F1B:
// F0 [0,1] B0 [1,3] F1 [3,4] B1 [4,6] STEP [6,11]. Makespan 2F + 2B + S = 11, all of it busy;
// with S = 0 the STEP is the instant [6,6] and the makespan 6.
TEST(Engine, StepCostOnOneRankHoldsTheStream) {
  for (const char* name : {"gpipe", "1f1b"}) {
    SCOPED_TRACE(name);
    const Schedule s = Make(name, 1, 2);
    const RunRecord timed = Simulate(s, WithStep(Uniform(1, kUs, kUs, kUs), 5 * kUs), Node(1), SimConfig{});
    EXPECT_EQ(timed.makespan_ns(), 11 * kUs);
    EXPECT_EQ(timed.ranks[0].busy_ns, 11 * kUs);
    EXPECT_EQ(timed.ranks[0].last_compute_end_ns, 11 * kUs);
    EXPECT_EQ(StepSpans(s, timed, 0), (Spans{{6 * kUs, 11 * kUs}}));

    const RunRecord instant = Simulate(s, Uniform(1, kUs, kUs, kUs), Node(1), SimConfig{});
    EXPECT_EQ(instant.makespan_ns(), 6 * kUs);
    EXPECT_EQ(instant.ranks[0].busy_ns, 6 * kUs);
    EXPECT_EQ(StepSpans(s, instant, 0), (Spans{{6 * kUs, 6 * kUs}}));
  }
}

// 1F1B, p = 2, m = 2, 2 steps, S on both stages. Lowered order:
//   r0: F0 SF0 F1 SF1 RB0 B0 RB1 B1 STEP | F0' SF0' F1' SF1' RB0' B0' RB1' B1' STEP
//   r1: RF0 F0 RF1 B0 SB0 F1 B1 SB1 STEP | RF0' F0' RF1' B0' SB0' F1' B1' SB1' STEP
// Step 0: r0 F0 [0,1] F1 [1,2] B0 [4,6] B1 [7,9] STEP [9,9+S];
//         r1 F0 [1,2] B0 [2,4] F1 [4,5] B1 [5,7] STEP [7,7+S].
// Step 1 waits for r0's STEP: r0 F0' [9+S,10+S] F1' [10+S,11+S] B0' [13+S,15+S] B1' [16+S,18+S]
//   STEP [18+S,18+2S]; r1 F0' [10+S,11+S] B0' [11+S,13+S] F1' [13+S,14+S] B1' [14+S,16+S]
//   STEP [16+S,16+2S].
// Makespan 2((m+p-1)(F+B) + S) = 18 + 2S; S = 0 gives 18, the flush closed form.
TEST(Engine, StepCostOneFOneBTwoRanksTwoSteps) {
  const Schedule s = Make("1f1b", 2, 2, 2);
  const int64_t step = 5 * kUs;
  const RunRecord timed = Simulate(s, WithStep(Uniform(2, kUs, kUs, kUs), step), Node(2), SimConfig{});
  EXPECT_EQ(timed.makespan_ns(), 18 * kUs + 2 * step);
  EXPECT_EQ(StepSpans(s, timed, 0), (Spans{{9 * kUs, 9 * kUs + step}, {18 * kUs + step, 18 * kUs + 2 * step}}));
  EXPECT_EQ(StepSpans(s, timed, 1), (Spans{{7 * kUs, 7 * kUs + step}, {16 * kUs + step, 16 * kUs + 2 * step}}));
  for (int r = 0; r < 2; ++r) EXPECT_EQ(timed.ranks[r].busy_ns, 12 * kUs + 2 * step) << "rank " << r;

  const RunRecord instant = Simulate(s, Uniform(2, kUs, kUs, kUs), Node(2), SimConfig{});
  EXPECT_EQ(instant.makespan_ns(), 18 * kUs);
  EXPECT_EQ(StepSpans(s, instant, 0), (Spans{{9 * kUs, 9 * kUs}, {18 * kUs, 18 * kUs}}));
  EXPECT_EQ(StepSpans(s, instant, 1), (Spans{{7 * kUs, 7 * kUs}, {16 * kUs, 16 * kUs}}));
  for (int r = 0; r < 2; ++r) EXPECT_EQ(instant.ranks[r].busy_ns, 12 * kUs) << "rank " << r;
}

// The same schedule with a slow last stage, S0 = 1 and S1 = 6: r1's STEP [7,13] posts RF0' at
// 13, so r0's F0' [10,11] waits for the rendezvous and the later stage sets the pace:
//   r0: STEP [9,10] F0' [10,11] F1' [11,12] B0' [16,18] B1' [19,21] STEP [21,22]
//   r1: STEP [7,13] F0' [13,14] B0' [14,16] F1' [16,17] B1' [17,19] STEP [19,25]
TEST(Engine, StepCostPerStageSlowLastStage) {
  const Schedule s = Make("1f1b", 2, 2, 2);
  CostTable costs = Uniform(2, kUs, kUs, kUs);
  costs.stages[0].step_ns = kUs;
  costs.stages[1].step_ns = 6 * kUs;
  const RunRecord r = Simulate(s, costs, Node(2), SimConfig{});
  EXPECT_EQ(r.makespan_ns(), 25 * kUs);
  EXPECT_EQ(StepSpans(s, r, 0), (Spans{{9 * kUs, 10 * kUs}, {21 * kUs, 22 * kUs}}));
  EXPECT_EQ(StepSpans(s, r, 1), (Spans{{7 * kUs, 13 * kUs}, {19 * kUs, 25 * kUs}}));
  EXPECT_EQ(r.ranks[0].busy_ns, 14 * kUs);
  EXPECT_EQ(r.ranks[1].busy_ns, 24 * kUs);
}

// PipeDream (weight stashing, a STEP after every backward), p = 2, m = 4, S on both stages:
//   r0: F0 SF0 F1 SF1 RB0 B0 STEP F2 SF2 RB1 B1 STEP F3 SF3 RB2 B2 STEP RB3 B3 STEP
//   r1: RF0 F0 RF1 B0 SB0 STEP F1 RF2 B1 SB1 STEP F2 RF3 B2 SB2 STEP F3 B3 SB3 STEP
// r0: F0 [0,1] F1 [1,2] B0 [4,6] STEP [6,6+S] F2 [6+S,7+S] B1 [7+S,9+S] STEP [9+S,9+2S]
//     F3 [9+2S,10+2S] B2 [10+2S,12+2S] STEP [12+2S,12+3S] B3 [13+3S,15+3S] STEP [15+3S,15+4S]
// r1: F0 [1,2] B0 [2,4] STEP [4,4+S] F1 [4+S,5+S] B1 [5+S,7+S] STEP [7+S,7+2S]
//     F2 [7+2S,8+2S] B2 [8+2S,10+2S] STEP [10+2S,10+3S] F3 [10+3S,11+3S] B3 [11+3S,13+3S]
//     STEP [13+3S,13+4S]
// Makespan 15 + 4S: every one of r0's m STEPs is on the critical path (S = 0: (m+p-1)(F+B)).
// Each STEP's new version exists only at its end: r0's first STEP leaves version 0 live (B1
// still reads it), so rank 0 first holds two weight copies at 6 + S.
TEST(Engine, StepCostPipeDreamStepAfterEveryBackward) {
  const Schedule s = Make("pipedream", 2, 4);
  const int64_t step = 3 * kUs, weight_bytes = 1'000'003;
  CostTable costs = WithStep(Uniform(2, kUs, kUs, kUs), step);
  for (auto& c : costs.stages) c.weight_bytes = weight_bytes;
  const RunRecord timed = Simulate(s, costs, Node(2), SimConfig{});
  EXPECT_EQ(timed.makespan_ns(), 15 * kUs + 4 * step);
  const auto at = [&](int64_t units, int steps) { return units * kUs + steps * step; };
  EXPECT_EQ(StepSpans(s, timed, 0),
            (Spans{{at(6, 0), at(6, 1)}, {at(9, 1), at(9, 2)}, {at(12, 2), at(12, 3)}, {at(15, 3), at(15, 4)}}));
  EXPECT_EQ(StepSpans(s, timed, 1),
            (Spans{{at(4, 0), at(4, 1)}, {at(7, 1), at(7, 2)}, {at(10, 2), at(10, 3)}, {at(13, 3), at(13, 4)}}));
  for (int r = 0; r < 2; ++r) EXPECT_EQ(timed.ranks[r].busy_ns, 12 * kUs + 4 * step) << "rank " << r;
  const auto& samples = timed.ranks[0].memory;
  const auto two_copies = std::find_if(samples.begin(), samples.end(),
                                       [&](const MemorySample& m) { return m.bytes >= 2 * weight_bytes; });
  ASSERT_NE(two_copies, samples.end());
  EXPECT_EQ(two_copies->time_ns, at(6, 1));

  const RunRecord instant = Simulate(s, Uniform(2, kUs, kUs, kUs), Node(2), SimConfig{});
  EXPECT_EQ(instant.makespan_ns(), 15 * kUs);
  EXPECT_EQ(timed.makespan_ns() - instant.makespan_ns(), 4 * step);
}

// ---- every registered generator -------------------------------------------------------
// The cases come from the generator table (schedules/registry.cpp): a schedule added there is
// checked here with no list to edit.

class EngineEveryGenerator : public ::testing::TestWithParam<std::string> {
 protected:
  const GeneratorInfo& Info() const { return *schedules::FindGenerator(GetParam()); }

  // The lowered schedule at 4 ranks x 8 microbatches (2 chunks where the generator interleaves).
  Schedule FourByEight(int steps) const {
    const int chunks = Info().interleaved ? 2 : 1;
    EXPECT_EQ(Info().check(schedules::test_cases::Params(4, 8, steps, chunks)), "") << "give it a shape it takes";
    return Make(GetParam(), 4, 8, steps, chunks);
  }

  // Every small shape the generator takes (generator_cases.h), lowered.
  std::vector<Schedule> SmallShapes() const {
    std::vector<Schedule> out;
    for (const auto& c : schedules::test_cases::SmallGeneratorCases()) {
      if (c.info->name != GetParam()) continue;
      out.push_back(Make(GetParam(), c.params.ranks, c.params.microbatches, c.params.steps, c.params.chunks));
    }
    EXPECT_FALSE(out.empty());
    return out;
  }
};

std::vector<std::string> RegisteredGenerators() {
  std::vector<std::string> names;
  for (const GeneratorInfo& info : schedules::Generators()) {
    if (info.in_all) names.emplace_back(info.name);  // the pipelines (spilled runs on one device: its own tests)
  }
  return names;
}

std::string Describe(const Schedule& s) {
  return s.name + " p=" + std::to_string(s.ranks()) + " m=" + std::to_string(s.microbatches) +
         " steps=" + std::to_string(s.steps) + " chunks=" + std::to_string(s.shape.chunks);
}

// Each rank is busy for exactly its ops' costs, counted from the IR (F 3, B 5 + 7, I 5, W 7,
// STEP 11 us), whatever the transfers do; and no schedule beats its critical path or its
// busiest rank: one microbatch's forward through every stage, then its input-gradient back.
TEST_P(EngineEveryGenerator, BusyTimeIsTheSumOfOpCostsAndMakespanBoundsHold) {
  const int64_t f = 3 * kUs, i = 5 * kUs, w = 7 * kUs, step = 11 * kUs;
  for (const Schedule& s : SmallShapes()) {
    SCOPED_TRACE(Describe(s));
    CostTable costs = Uniform(s.stages(), f, i, w, 1'000'000);
    for (auto& c : costs.stages) c.step_ns = step;
    const RunRecord result = Simulate(s, costs, Node(s.ranks(), 10e9, 1000), SimConfig{});
    int64_t busiest = 0;
    for (int r = 0; r < s.ranks(); ++r) {
      int64_t expected = 0;
      for (const auto& op : s.ops[r]) {
        expected += op.kind == OpKind::kF      ? f
                    : op.kind == OpKind::kB    ? i + w
                    : op.kind == OpKind::kI    ? i
                    : op.kind == OpKind::kW    ? w
                    : op.kind == OpKind::kStep ? step
                                               : 0;
      }
      EXPECT_EQ(result.ranks[r].busy_ns, expected) << "rank " << r;
      busiest = std::max(busiest, expected);
    }
    EXPECT_GE(result.makespan_ns(), busiest);
    EXPECT_GE(result.makespan_ns(), s.stages() * (f + i));
  }
}

// At the papers' unit costs (F = I = W = 1, B = 2) with free communication, every compute op
// starts and ends where the IR's unit-time grid (analysis.h) puts it.
TEST_P(EngineEveryGenerator, UnitCostsReproduceTheIrGrid) {
  for (const Schedule& s : SmallShapes()) {
    SCOPED_TRACE(Describe(s));
    const RunRecord result = Simulate(s, Uniform(s.stages(), kUs, kUs, kUs), Node(s.ranks()), SimConfig{});
    const schedules::UnitGrid grid = schedules::UnitTimeGrid(s);
    EXPECT_EQ(result.makespan_ns(), grid.makespan * kUs);
    for (int r = 0; r < s.ranks(); ++r) {
      for (const auto& cell : grid.cells[r]) {
        const OpTiming& t = result.ranks[r].ops[cell.op_index];
        EXPECT_EQ(t.start_ns, cell.start * kUs) << "rank " << r << " op " << cell.op_index;
        EXPECT_EQ(t.end_ns, (cell.start + cell.duration) * kUs) << "rank " << r << " op " << cell.op_index;
      }
    }
  }
}

// Weight versions over time agree with the IR analysis.
TEST_P(EngineEveryGenerator, WeightVersionsMatchIrAnalysis) {
  const Schedule s = FourByEight(3);
  const RunRecord result = Simulate(s, Uniform(s.stages(), kMs, kMs, kMs), Node(4), SimConfig{});
  const auto analysis = schedules::Analyze(s);
  for (int r = 0; r < 4; ++r) {
    EXPECT_EQ(result.ranks[r].peak_weight_versions, analysis[r].peak_weight_versions) << "rank " << r;
  }
}

// The predicted bubble split (bubble_split.h): the five parts add up to the makespan on every
// rank, compute is the busy time, and the simulator models no runtime overhead, so every gap
// between two compute ops is waiting or a transfer.
TEST_P(EngineEveryGenerator, BubbleSplitSumsToTheMakespanWithoutOverhead) {
  for (const Schedule& s : SmallShapes()) {
    SCOPED_TRACE(Describe(s));
    for (const schedules::P2p p2p : {schedules::P2p::kLockstep, schedules::P2p::kAhead}) {
      const Schedule lowered = schedules::Lower(schedules::Generate(s.name, schedules::test_cases::Params(
                                                    s.ranks(), s.microbatches, s.steps, s.shape.chunks)),
                                                p2p);
      const RunRecord result =
          Simulate(lowered, Uniform(s.stages(), 3 * kUs, 5 * kUs, 7 * kUs, 1'000'000), Node(s.ranks(), 10e9, 1000), SimConfig{});
      const auto split = schedules::SplitBubbles(lowered, result, false);
      for (int r = 0; r < s.ranks(); ++r) {
        const auto& x = split[r];
        EXPECT_EQ(x.compute_ns, result.ranks[r].busy_ns) << "rank " << r;
        EXPECT_EQ(x.overhead_ns, 0) << "rank " << r;
        EXPECT_EQ(x.compute_ns + x.wait_ns + x.transfer_ns + x.overhead_ns + x.idle_ns, result.makespan_ns()) << "rank " << r;
      }
    }
  }
}

TEST_P(EngineEveryGenerator, Deterministic) {
  const Schedule s = FourByEight(2);
  const CostTable costs = Uniform(s.stages(), kMs, kMs, kMs, 1'000'000);
  const auto a = BuildTrace(s, Simulate(s, costs, Node(4, 10e9, 1000), SimConfig{}), "x", "predicted", std::nullopt);
  const auto b = BuildTrace(s, Simulate(s, costs, Node(4, 10e9, 1000), SimConfig{}), "x", "predicted", std::nullopt);
  EXPECT_EQ(schedules::TraceToJson(a), schedules::TraceToJson(b));
}

INSTANTIATE_TEST_SUITE_P(Registry, EngineEveryGenerator, ::testing::ValuesIn(RegisteredGenerators()),
                         [](const auto& info) {
                           std::string name = info.param;
                           std::replace(name.begin(), name.end(), '-', '_');
                           return name;
                         });

// Memory: activation A per stashed microbatch, weights Wt x live versions, gradients G and
// optimizer state O; the simulated peak equals the IR analysis to the byte. The sum of the
// two peaks is the peak of the sum only where one weight version lives at a time: for every
// generator of the flush policy.
TEST(Engine, PeakMemoryEqualsIrAnalysisForEveryFlushGenerator) {
  const int64_t a = 3'000'001, wt = 50'000'017, g = 7'000'003, o = 11'000'009;
  int checked = 0;
  for (const GeneratorInfo& info : schedules::Generators()) {
    if (info.weights != schedules::WeightPolicy::kFlush || !info.in_all) continue;
    SCOPED_TRACE(std::string(info.name));
    const int chunks = info.interleaved ? 2 : 1;
    const Schedule s = Make(std::string(info.name), 4, 8, 2, chunks);
    const CostTable costs = testing::WithMemory(Uniform(s.stages(), kMs, kMs, kMs), a, wt, g, o);
    const RunRecord result = Simulate(s, costs, Node(4), SimConfig{});
    const auto analysis = schedules::Analyze(s);
    for (int r = 0; r < 4; ++r) {
      const int64_t expected = analysis[r].peak_inflight * a + chunks * (wt * analysis[r].peak_weight_versions + g + o);
      EXPECT_EQ(result.ranks[r].peak_memory_bytes, expected) << "rank " << r;
      EXPECT_EQ(result.ranks[r].peak_inflight, analysis[r].peak_inflight) << "rank " << r;
    }
    ++checked;
  }
  EXPECT_GE(checked, 5);  // gpipe, 1f1b, interleaved, zb-h1, zb-h2 at least
}

}  // namespace
}  // namespace stagecraft::sim

namespace stagecraft::sim {
namespace {

// The index of rank `rank`'s first op of `kind` in `s` (-1: none).
int FirstOp(const schedules::Schedule& s, int rank, schedules::OpKind kind) {
  for (size_t i = 0; i < s.ops[rank].size(); ++i) {
    if (s.ops[rank][i].kind == kind) return static_cast<int>(i);
  }
  return -1;
}

// A per-op table of `s` (CostTable::op_ns, transfer_ns) with nothing measured.
std::vector<std::vector<int64_t>> NothingMeasured(const schedules::Schedule& s) {
  std::vector<std::vector<int64_t>> table;
  for (const auto& ops : s.ops) table.emplace_back(ops.size(), -1);
  return table;
}

// A replayed run's measured op times (CostTable::op_ns) replace the stage's cost op by op:
// GPipe on 2 ranks, 2 microbatches of F = B = 1 ms (makespan (m + p − 1)(F + B) = 6 ms); rank
// 1's first F measured at 4 ms delays everything after it by 3 ms; -1 keeps the stage's cost.
TEST(Engine, MeasuredOpTimesReplaceTheStageCosts) {
  const schedules::Schedule s = testing::Make("gpipe", 2, 2);
  CostTable costs = testing::Uniform(2, kMs, kMs / 2, kMs / 2);
  EXPECT_EQ(Simulate(s, costs, testing::Node(2), SimConfig{}).makespan_ns(), 6 * kMs);
  const int first_f = FirstOp(s, 1, schedules::OpKind::kF);
  ASSERT_GE(first_f, 0);
  costs.op_ns = NothingMeasured(s);
  costs.op_ns[1][first_f] = 4 * kMs;
  const RunRecord r = Simulate(s, costs, testing::Node(2), SimConfig{});
  EXPECT_EQ(r.ranks[1].ops[first_f].end_ns - r.ranks[1].ops[first_f].start_ns, 4 * kMs);
  EXPECT_EQ(r.makespan_ns(), 9 * kMs);
}

// A measured transfer time (CostTable::transfer_ns) replaces the modelled one: GPipe on 2 ranks,
// one microbatch of F = B = 1 ms over a free link (makespan 4 ms); the activation's transfer
// measured at 2 ms delays rank 1's F, and with it everything after, by 2 ms.
TEST(Engine, MeasuredTransferTimesReplaceTheModelledOnes) {
  const schedules::Schedule s = testing::Make("gpipe", 2, 1);
  CostTable costs = testing::Uniform(2, kMs, kMs / 2, kMs / 2);
  EXPECT_EQ(Simulate(s, costs, testing::Node(2), SimConfig{}).makespan_ns(), 4 * kMs);
  const int send_f = FirstOp(s, 0, schedules::OpKind::kSendF);
  ASSERT_GE(send_f, 0);
  costs.transfer_ns = NothingMeasured(s);
  costs.transfer_ns[0][send_f] = 2 * kMs;
  EXPECT_EQ(Simulate(s, costs, testing::Node(2), SimConfig{}).makespan_ns(), 6 * kMs);
}

}  // namespace
}  // namespace stagecraft::sim
