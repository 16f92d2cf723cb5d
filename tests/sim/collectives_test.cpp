// Data-parallel collectives (sim/collectives.h, collective_streams.h, the engine): each plan's
// time alone against the closed forms nccl-tests states its bus bandwidth by (a ring all-reduce
// moves 2(n-1)/n of the bytes through each rank's link, a reduce-scatter or all-gather (n-1)/n),
// the tree and hierarchical forms worked by hand, the choice between them, flows sharing a link
// with a pipeline transfer, and a REDUCE_GRAD in a simulated run timed by hand, by the plans and
// by a measured fit.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "sim_test_util.h"
#include "stagecraft/schedules/lower.h"
#include "stagecraft/sim/collective_streams.h"
#include "stagecraft/sim/collectives.h"
#include "stagecraft/sim/engine.h"
#include "stagecraft/sim/transfers.h"

namespace stagecraft::sim {
namespace {

using testing::kMs;
using testing::Node;

std::vector<int> Range(int n, int first = 0) {
  std::vector<int> d;
  for (int i = 0; i < n; ++i) d.push_back(first + i);
  return d;
}

// nccl-tests: algbw = bytes / time; busbw = algbw x 2(n-1)/n for an all-reduce, x (n-1)/n for
// a reduce-scatter or all-gather. With no latency the bus bandwidth is the link's.
TEST(Collectives, RingMatchesTheBusBandwidthClosedForms) {
  for (int n : {2, 3, 8}) {
    const Topology node = Node(n, 100e9, 0);
    const double bytes = 1e9;
    const double ring = PlanAloneNs(node, RingAllReduce(node, Range(n), static_cast<int64_t>(bytes)));
    const double busbw = bytes / (ring * 1e-9) * 2 * (n - 1) / n;
    EXPECT_NEAR(busbw, 100e9, 100e9 * 1e-6) << n;
    EXPECT_NEAR(ring, AllReduceNs(bytes, n, RingLink{100e9, 0}), 1) << n;
    const double rs = ReduceScatterNs(bytes, n, RingLink{100e9, 0});
    EXPECT_NEAR(bytes / (rs * 1e-9) * (n - 1) / n, 100e9, 100e9 * 1e-6);
    EXPECT_NEAR(AllGatherNs(bytes, n, RingLink{100e9, 0}), rs, 1e-6);
  }
  // With latency: 2(n-1) steps, each paying the route's (device -> switch -> device) latency.
  const Topology node = Node(8, 100e9, 3000);
  EXPECT_NEAR(PlanAloneNs(node, RingAllReduce(node, Range(8), 800'000'000)), 14 * 3000 + 1.75 * 8e6, 1);
  EXPECT_NEAR(PlanAloneNs(node, RingAllReduce(node, Range(8), 800'000'000), 500), 14 * 3500 + 1.75 * 8e6, 1);
}

// A binary tree over 8 devices: depth 3, so 6 steps; an inner device sends B to each of its two
// children and B up to its parent, 3B through its uplink.
TEST(Collectives, TreeIsWorkedByHandAndWinsWhenLatencyBound) {
  const Topology node = Node(8, 100e9, 3000);
  const CollectivePlan tree = TreeAllReduce(node, Range(8), 1'000'000);
  ASSERT_EQ(tree.phases.size(), 1u);
  EXPECT_EQ(tree.phases[0].steps, 6);
  EXPECT_EQ(tree.phases[0].flows.size(), 14u);
  EXPECT_NEAR(PlanAloneNs(node, tree), 6 * 3000 + 3 * 10'000, 1);
  // 1 KB: latency rules, the tree's 6 steps beat the ring's 14. 1 GB: the ring's 1.75 B beats 3 B.
  EXPECT_EQ(PlanAllReduce(node, Range(8), 1000).algorithm, CollectiveAlgorithm::kTree);
  EXPECT_EQ(PlanAllReduce(node, Range(8), 1'000'000'000).algorithm, CollectiveAlgorithm::kRing);
}

// Two nodes of 4 (node links 400 GB/s, 1 us; cluster 25 GB/s, 10 us): reduce-scatter in each
// node (3 steps, 3/4 B), all-reduce across the nodes among devices of the same local index
// (2 steps, B/4 each way), all-gather in each node; against a flat ring of 8 over the cluster
// links (14 steps of 10 us, 1.75 B at 25 GB/s).
TEST(Collectives, HierarchicalIsWorkedByHandAndBeatsTheFlatRingAcrossNodes) {
  const Topology machine = Node(4, 400e9, 1000, 2, 25e9, 10'000);
  const int64_t bytes = 400'000'000;
  const CollectivePlan h = HierarchicalAllReduce(machine, Range(8), bytes);
  ASSERT_EQ(h.phases.size(), 3u);
  const double intra = 3 * 1000 + 0.75 * bytes / 400e9 * 1e9;
  const double across = 2 * 10'000 + 2.0 * (1.0 / 2) * (bytes / 4.0) / 25e9 * 1e9;
  EXPECT_NEAR(PlanAloneNs(machine, h), 2 * intra + across, 2);
  const double flat = 14 * 10'000 + 1.75 * bytes / 25e9 * 1e9;
  EXPECT_NEAR(PlanAloneNs(machine, RingAllReduce(machine, Range(8), bytes)), flat, 2);
  EXPECT_EQ(PlanAllReduce(machine, Range(8), bytes).algorithm, CollectiveAlgorithm::kHierarchical);
  // One device per node, or an uneven spread: no hierarchy to use.
  EXPECT_TRUE(HierarchicalAllReduce(machine, {0, 4}, bytes).phases.empty());
  EXPECT_TRUE(HierarchicalAllReduce(machine, {0, 1, 4}, bytes).phases.empty());
  EXPECT_TRUE(PlanAllReduce(machine, {3}, bytes).phases.empty());
}

class FlowBench final : public Transfers::Listener {
 public:
  explicit FlowBench(Topology machine) : topology(std::move(machine)), transfers(topology, 0, 4, &loop, this) {}
  void TransferStarted(size_t) override {}
  void TransferArrived(size_t slot) override { arrived[slot] = loop.now_ns(); }
  Topology topology;
  EventLoop loop;
  Transfers transfers;
  int64_t arrived[4] = {-1, -1, -1, -1};
};

// A collective's flow and a pipeline transfer leaving the same device share its uplink: 100 MB
// each at 100 GB/s take 2 ms together, 1 ms alone.
TEST(Collectives, FlowsShareLinksWithTransfers) {
  FlowBench bench(Node(3, 100e9, 0));
  bench.transfers.Post(0, Transfers::End::kSend, 0, 1, 100'000'000);
  bench.transfers.Post(0, Transfers::End::kRecv, 0, 1, 100'000'000);
  bench.transfers.StartFlow(1, 0, 2, 100'000'000);
  bench.loop.Run();
  EXPECT_EQ(bench.arrived[0], 2 * kMs);
  EXPECT_EQ(bench.arrived[1], 2 * kMs);
  FlowBench alone(Node(3, 100e9, 0));
  alone.transfers.StartFlow(1, 0, 2, 100'000'000);
  alone.transfers.StartFlow(2, 1, 2, 0);  // zero bytes: arrives at once
  alone.loop.Run();
  EXPECT_EQ(alone.arrived[1], kMs);
  EXPECT_EQ(alone.arrived[2], 0);
}

// One pipeline rank, 2 replicas on devices 0 and 1 of a node (10 GB/s, 2 us); GPipe over 2
// microbatches of F 1 ms, B 2 ms: the REDUCE_GRAD of 10 MB posted at 6 ms takes 2 steps of 2 us
// and 10 MB at 10 GB/s (each replica sends the other 2(2-1)/2 x 10 MB) = 1.004 ms; the STEP
// (0.5 ms) starts when it ends.
TEST(Collectives, ReduceGradInARunIsTimedByHand) {
  schedules::GeneratorParams p = schedules::test_cases::Params(1, 2);
  p.data_parallel = 2;
  const schedules::Schedule s = schedules::Lower(schedules::Generate("gpipe", p));
  CostTable costs = testing::Uniform(1, kMs, kMs, kMs);
  costs.stages[0].grad_bytes = 10'000'000;
  costs.stages[0].step_ns = kMs / 2;
  SimConfig config;
  config.replica_devices = {{0, 1}};
  const RunRecord r = Simulate(s, costs, Node(2, 10e9, 2000), config);
  int64_t reduce_start = -1, reduce_end = -1, step_start = -1;
  for (size_t i = 0; i < s.ops[0].size(); ++i) {
    if (s.ops[0][i].kind == schedules::OpKind::kReduceGrad) {
      reduce_start = r.ranks[0].ops[i].start_ns;
      reduce_end = r.ranks[0].ops[i].end_ns;
    }
    if (s.ops[0][i].kind == schedules::OpKind::kStep) step_start = r.ranks[0].ops[i].start_ns;
  }
  EXPECT_EQ(reduce_start, 6 * kMs);
  EXPECT_EQ(reduce_end, 6 * kMs + 2 * 2000 + kMs);
  EXPECT_EQ(step_start, reduce_end);
  EXPECT_EQ(r.makespan_ns(), reduce_end + kMs / 2);
  // The same run with one replica: the STEP follows the last backward at once.
  const RunRecord one = Simulate(testing::Make("gpipe", 1, 2), costs, Node(2, 10e9, 2000), SimConfig{});
  EXPECT_EQ(one.makespan_ns(), 6 * kMs + kMs / 2);
}

// Megatron-LM's --overlap-grad-reduce (CostTable::grad_reduce_overlap), the run above by hand: the
// last backward [4, 6] ms covers 2 ms of the reduce's 1.004 ms alone, so only its two steps' latency
// is left after it: [6, 6.004] ms. With 30 MB it takes 3.004 ms alone; 2 ms of it ran beside the
// backward, so 1 - 2 / 3.004 of the 30 MB (10.027 MB, 1.0027 ms at 10 GB/s) and the latency remain.
TEST(Collectives, AnOverlappedReduceLeavesOnlyWhatItsLastBackwardDidNotCoverByHand) {
  schedules::GeneratorParams p = schedules::test_cases::Params(1, 2);
  p.data_parallel = 2;
  const schedules::Schedule s = schedules::Lower(schedules::Generate("gpipe", p));
  SimConfig config;
  config.replica_devices = {{0, 1}};
  const auto reduce = [&](int64_t bytes, bool overlap) {
    CostTable costs = testing::Uniform(1, kMs, kMs, kMs);
    costs.stages[0].grad_bytes = bytes;
    costs.stages[0].step_ns = kMs / 2;
    costs.grad_reduce_overlap = overlap;
    const RunRecord r = Simulate(s, costs, Node(2, 10e9, 2000), config);
    for (size_t i = 0; i < s.ops[0].size(); ++i) {
      if (s.ops[0][i].kind == schedules::OpKind::kReduceGrad) {
        EXPECT_EQ(r.makespan_ns(), r.ranks[0].ops[i].end_ns + kMs / 2);  // the STEP still waits for it
        return std::pair{r.ranks[0].ops[i].start_ns, r.ranks[0].ops[i].end_ns};
      }
    }
    return std::pair<int64_t, int64_t>{-1, -1};
  };
  EXPECT_EQ(reduce(10'000'000, false), (std::pair<int64_t, int64_t>{6 * kMs, 6 * kMs + 2 * 2000 + kMs}));
  EXPECT_EQ(reduce(10'000'000, true), (std::pair<int64_t, int64_t>{6 * kMs, 6 * kMs + 2 * 2000}));
  const auto [start, end] = reduce(30'000'000, true);
  EXPECT_EQ(start, 6 * kMs);
  const double left = 1.0 - 2e6 / 3.004e6;
  EXPECT_NEAR(static_cast<double>(end), 6e6 + 2 * 2000 + 30e6 * left / 10e9 * 1e9, 2.0);
  EXPECT_EQ(reduce(30'000'000, false).second, 6 * kMs + 2 * 2000 + 3 * kMs);
}

// A measured all-reduce fit (CostTable::allreduce): 30 us a step, 2 GB/s of bus bandwidth,
// measured on 2 ranks. The GPipe run above with D = 2: 2 steps x 30 us + 2(2-1)/2 x 10 MB at
// 2 GB/s = 60 us + 5 ms = 5.06 ms from 6 ms, whatever the links (10 GB/s, 2 us) or the p2p fit
// (1 us, 50 GB/s) say. With D = 4 on 4 devices the fit is applied for n = 4: 6 x 30 us +
// 2(4-1)/4 x 10 MB = 15 MB at 2 GB/s = 180 us + 7.5 ms = 7.68 ms. The STEP waits for it, and the
// run bound counts every REDUCE_GRAD at that time.
TEST(Collectives, ReduceGradWithAMeasuredFitIsTimedByTheFit) {
  for (const auto& [replicas, reduce_ns] : {std::pair{2, 5'060'000}, std::pair{4, 7'680'000}}) {
    SCOPED_TRACE(replicas);
    schedules::GeneratorParams p = schedules::test_cases::Params(1, 2);
    p.data_parallel = replicas;
    const schedules::Schedule s = schedules::Lower(schedules::Generate("gpipe", p));
    CostTable costs = testing::Uniform(1, kMs, kMs, kMs);
    costs.stages[0].grad_bytes = 10'000'000;
    costs.stages[0].step_ns = kMs / 2;
    costs.p2p = P2pFit{1000, 50e9, 1, 0};
    costs.allreduce = CollectiveFit{30'000, 2e9, 2};
    SimConfig config;
    config.replica_devices = {Range(replicas)};
    const Topology node = Node(replicas, 10e9, 2000);
    const RunRecord r = Simulate(s, costs, node, config);
    int64_t reduce_start = -1, reduce_end = -1, step_start = -1, reduces = 0;
    for (size_t i = 0; i < s.ops[0].size(); ++i) {
      if (s.ops[0][i].kind == schedules::OpKind::kReduceGrad) {
        reduce_start = r.ranks[0].ops[i].start_ns;
        reduce_end = r.ranks[0].ops[i].end_ns;
        ++reduces;
      }
      if (s.ops[0][i].kind == schedules::OpKind::kStep) step_start = r.ranks[0].ops[i].start_ns;
    }
    EXPECT_EQ(reduce_start, 6 * kMs);
    EXPECT_EQ(reduce_end, 6 * kMs + reduce_ns);
    EXPECT_EQ(step_start, reduce_end);
    EXPECT_EQ(r.makespan_ns(), reduce_end + kMs / 2);
    const CollectivePlans plans(s, costs, node, config.replica_devices);
    EXPECT_EQ(plans.of(0).algorithm, CollectiveAlgorithm::kMeasured);
    EXPECT_EQ(plans.max_flows(), 0u);  // no flows: it shares no link
    EXPECT_DOUBLE_EQ(plans.AloneNs(), static_cast<double>(reduces * reduce_ns));
  }
}

// The measured plan alone, 60 us + 5 ms as above, whatever the topology; a group of one has no
// phases.
TEST(Collectives, MeasuredPlanIsOnePhaseOfTheFitsTime) {
  const CollectiveFit fit{30'000, 2e9, 2};
  const CollectivePlan plan = MeasuredAllReduce(fit, 2, 10'000'000);
  ASSERT_EQ(plan.phases.size(), 1u);
  EXPECT_TRUE(plan.phases[0].flows.empty());
  EXPECT_EQ(plan.phases[0].measured_ns, 5'060'000);
  EXPECT_DOUBLE_EQ(PlanAloneNs(Node(2, 10e9, 2000), plan), 5'060'000.0);
  EXPECT_TRUE(MeasuredAllReduce(fit, 1, 10'000'000).phases.empty());
  // What the calibration runs saw (1 GB/s) moves the bytes; the latency stays: 2 x 30 us + 10 ms.
  CollectiveFit seen = fit;
  seen.pipeline_bus_bytes_per_s = 1e9;
  EXPECT_EQ(MeasuredAllReduce(seen, 2, 10'000'000).phases.at(0).measured_ns, 10'060'000);
}

// A fit that would take past the hour an op may last is refused by name, not overflowed: 1 PB at
// the slowest bus bandwidth a profile takes (1 KB/s) is 1e12 s (capped at 1e18 ns = 1e9 s).
TEST(Collectives, AMeasuredAllReducePastTheOpLimitIsRefused) {
  schedules::GeneratorParams p = schedules::test_cases::Params(1, 2);
  p.data_parallel = 2;
  const schedules::Schedule s = schedules::Lower(schedules::Generate("gpipe", p));
  CostTable costs = testing::Uniform(1, kMs, kMs, kMs);
  costs.stages[0].grad_bytes = int64_t{1} << 50;
  costs.allreduce = CollectiveFit{0, 1e3, 2};
  const std::string error = testing::ErrorOf([&] { CollectivePlans(s, costs, Node(2, 10e9, 0), {{0, 1}}); });
  EXPECT_NE(error.find("the all-reduce of stage 0's gradients (1125899906842624 bytes over 2 replicas, measured) "
                       "would take 1e+09 s, above the limit of 1 h per op"),
            std::string::npos)
      << error;
}

// Interleaved, rank 0 holds stages 0 and 2: stage 2's all-reduce runs while stage 0's
// backwards do, so the run is shorter than one that waits for both all-reduces at its end.
TEST(Collectives, AReduceOverlapsTheBackwardsOfTheRanksOtherStage) {
  schedules::GeneratorParams p = schedules::test_cases::Params(2, 4, 1, 2);
  p.data_parallel = 2;
  const schedules::Schedule s = schedules::Lower(schedules::Generate("interleaved", p));
  CostTable costs = testing::Uniform(4, kMs, kMs, kMs);
  for (auto& c : costs.stages) c.grad_bytes = 20'000'000;  // 2 ms at 10 GB/s
  SimConfig config;
  config.replica_devices = {{0, 2}, {1, 3}};
  const RunRecord r = Simulate(s, costs, Node(4, 10e9, 0), config);
  const RunRecord plain = Simulate(schedules::Lower(schedules::Generate("interleaved", schedules::test_cases::Params(2, 4, 1, 2))),
                                   costs, Node(4, 10e9, 0), SimConfig{});
  // Without overlap both 2 ms all-reduces would follow the last backward: 4 ms more. With it,
  // only the last stage-0 one is exposed (2 ms), and the other ran beside rank 0's backwards.
  EXPECT_EQ(r.makespan_ns(), plain.makespan_ns() + 2 * kMs);
  for (size_t i = 0; i < s.ops[0].size(); ++i) {
    if (s.ops[0][i].kind == schedules::OpKind::kReduceGrad && s.ops[0][i].stage == 2) {
      EXPECT_LT(r.ranks[0].ops[i].end_ns, plain.end_ns) << "stage 2's all-reduce ends before the backwards do";
    }
  }
}

}  // namespace
}  // namespace stagecraft::sim
