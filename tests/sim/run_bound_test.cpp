// Tests for sim/src/run_bound.cpp: the bound of small schedules worked by hand, the limit of one
// year at its edge for a built schedule (scenario_limits_test: before any is built), and a
// transfer alone over an hour.
#include "stagecraft/sim/run_bound.h"

#include <gtest/gtest.h>

#include <string>

#include "sim_test_util.h"
#include "stagecraft/scenario/limits.h"

namespace stagecraft::sim {
namespace {

using testing::ErrorOf;
using testing::kMs;
using testing::kUs;
using testing::Make;
using testing::Node;
using testing::Uniform;

// gpipe, 2 ranks x 2 microbatches, F 1 ms, B 1.5 + 0.5 ms: 2 stages x 2 units x 3 ms = 12 ms on
// the streams; 4 transfers (2 microbatches, activation and gradient) of 1000 B over a route of
// 3 us and 1 MB/s: 3 us + 1 ms each.
TEST(BoundRun, HandWorkedGpipe) {
  const schedules::Schedule s = Make("gpipe", 2, 2);
  CostTable costs = Uniform(2, kMs, 1500 * kUs, 500 * kUs, 1000);
  const Topology topology = Node(2, 1e6, 3 * kUs);
  RunBound bound = BoundRun(s, costs, topology);
  EXPECT_DOUBLE_EQ(bound.compute_ns, 12.0 * kMs);
  EXPECT_DOUBLE_EQ(bound.transfer_ns, 4 * (3.0 * kUs + kMs));
  // 10 us of runtime overhead after each of its 18 ops (F 4, B 4, STEP 2, SEND/RECV 8).
  ASSERT_EQ(s.OpCount(), 18u);
  costs.op_overhead_ns = 10 * kUs;
  EXPECT_DOUBLE_EQ(BoundRun(s, costs, topology).compute_ns, 12.0 * kMs + 18 * 10.0 * kUs);
  // A measured fit replaces the route: 5 us + 1000 B at 1 GB/s.
  costs.p2p = P2pFit{5 * kUs, 1e9, 0.5, 0};
  EXPECT_DOUBLE_EQ(BoundRun(s, costs, topology).transfer_ns, 4 * (5.0 * kUs + 1000));
}

// Placed on devices 0 and 4 of two nodes of 4, the ranks talk over the cluster's route: 5 us and
// 1 MB/s instead of the node's 3 us and 2 MB/s.
TEST(BoundRun, TransfersFollowTheRanksDevices) {
  const schedules::Schedule s = Make("gpipe", 2, 2);
  const CostTable costs = Uniform(2, kMs, 1500 * kUs, 500 * kUs, 1000);
  const Topology topology = Node(4, 2e6, 3 * kUs, 2, 1e6, 5 * kUs);
  EXPECT_DOUBLE_EQ(BoundRun(s, costs, topology).transfer_ns, 4 * (3.0 * kUs + 500 * kUs));
  EXPECT_DOUBLE_EQ(BoundRun(s, costs, topology, {0, 4}).transfer_ns, 4 * (5.0 * kUs + kMs));
}

// One rank, 8766 microbatches of F 1800 s + B 1800 s: 8766 h, one year exactly.
constexpr int kYearOfHours = 8766;

TEST(CheckRunBound, OneYearIsTheLimit) {
  const schedules::Schedule s = Make("gpipe", 1, kYearOfHours);
  const int64_t half_hour = kMaxOpNs / 2;
  EXPECT_EQ(ErrorOf([&] { CheckRunBound(s, Uniform(1, half_hour, half_hour, 0), Node(1)); }), "");
  EXPECT_EQ(ErrorOf([&] { CheckRunBound(s, Uniform(1, half_hour + 1, half_hour, 0), Node(1)); }),
            "gpipe could run for up to 31557600.00001 s of simulated time (17533 ops over 1 rank take 3.2e+07 s on "
            "the streams, 8766 microbatches x 1 step; transfers 0 s alone), above the limit of 1 year (3.2e+07 s); "
            "fewer microbatches or steps, or shorter ops, would fit");
}

TEST(BoundRun, ATransferAloneOverAnHour) {
  const schedules::Schedule s = Make("gpipe", 2, 1);
  // 3.6e9 bytes at 1 MB/s: 3600 s, then 1 us of latency.
  const CostTable costs = Uniform(2, kMs, kMs, kMs, 3'600'000'000);
  EXPECT_EQ(ErrorOf([&] { BoundRun(s, costs, Node(2, 1e6, 0)); }), "");
  EXPECT_EQ(ErrorOf([&] { BoundRun(s, costs, Node(2, 1e6, kUs)); }),
            "gpipe: a transfer of activations from stage 0 (rank 0) to stage 1 (rank 1) would take 3600.000001 s "
            "(3.6e+09 bytes, stage 0's send_bytes, at 1e+06 B/s over the slowest link of its route, after 1e-06 s of "
            "latency), above the limit of 1 h per op");
}

}  // namespace
}  // namespace stagecraft::sim
