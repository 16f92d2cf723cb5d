// Tests for sim/src/run_bound.cpp: the bound of small schedules worked by hand, the limit of one
// year at its edge for a built schedule and for a scenario before any schedule is built, and a
// transfer alone over an hour.
#include "stagecraft/sim/run_bound.h"

#include <gtest/gtest.h>

#include <string>

#include "sim_test_util.h"
#include "stagecraft/sim/limits.h"

namespace stagecraft::sim {
namespace {

using testing::ErrorOf;
using testing::kMs;
using testing::kUs;
using testing::Make;
using testing::Node;
using testing::ScratchDir;
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
  costs.p2p = P2pProfile{5 * kUs, 1e9, 0.5, 0};
  EXPECT_DOUBLE_EQ(BoundRun(s, costs, topology).transfer_ns, 4 * (5.0 * kUs + 1000));
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

constexpr const char* kScenario = R"(name: year
topology:
  device: {name: d, peak: 1TFLOPS, memory: 1GiB}
  devices_per_node: 1
model:
  costs: {forward: 1800s, backward_input: 1800s, backward_weight: 0}
pipeline:
  schedule: gpipe
  ranks: 1
  microbatches: 8766
)";

// The same year from the scenario alone, at load, before any schedule is built.
TEST(CheckScenarioRunBound, OneYearIsTheLimitAtLoad) {
  ScratchDir dir;
  const std::string path = dir.Write("year.yaml", kScenario);
  EXPECT_EQ(ErrorOf([&] { LoadScenario(path, {}); }), "");
  EXPECT_EQ(ErrorOf([&] { LoadScenario(path, {"model.costs.forward=1800000000001ns"}); }),
            path + ": gpipe could run for up to 31557600.00001 s of simulated time (8766 microbatches x 1 step over 1 "
                   "stage; one microbatch's forward and backward take 3.6e+03 s on stage 0), above the limit of 1 year "
                   "(3.2e+07 s); fewer microbatches or steps, or shorter ops, would fit");
  // Steps multiply: 2 steps of 4383 microbatches are the same year.
  EXPECT_EQ(ErrorOf([&] { LoadScenario(path, {"pipeline.microbatches=4383", "pipeline.steps=2"}); }), "");
  EXPECT_NE(ErrorOf([&] { LoadScenario(path, {"pipeline.microbatches=4383", "pipeline.steps=3"}); }), "");
}

// The issue's run: forward 1000 s over 100,000 microbatches on 4 ranks is refused at load.
TEST(CheckScenarioRunBound, ThousandSecondForwardsOverAHundredThousandMicrobatches) {
  const std::string path = STAGECRAFT_SOURCE_DIR "/scenarios/uniform-costs.yaml";
  EXPECT_EQ(ErrorOf([&] {
              LoadScenario(path, {"model.costs.forward=1000s", "pipeline.microbatches=100000", "pipeline.schedule=1f1b"});
            }),
            path + ": 1f1b could run for up to 4e+08 s of simulated time (100000 microbatches x 1 step over 4 stages; "
                   "one microbatch's forward and backward take 1e+03 s on stage 0), above the limit of 1 year "
                   "(3.2e+07 s); fewer microbatches or steps, or shorter ops, would fit");
}

}  // namespace
}  // namespace stagecraft::sim
