// Tests for sim/src/engine.cpp at the edges of its input: 10^4 ranks against 1F1B's closed form,
// a run of exactly one year (the limit) and one a nanosecond per op longer (refused, not an
// abort), and memory totals past int64 (saturated, accounted exactly).
#include <gtest/gtest.h>

#include <cstdint>
#include <limits>

#include "sim_test_util.h"
#include "stagecraft/schedules/metrics.h"
#include "stagecraft/sim/engine.h"
#include "stagecraft/scenario/limits.h"

namespace stagecraft::sim {
namespace {

using testing::ErrorOf;
using testing::kMs;
using testing::Make;
using testing::Node;
using testing::Uniform;

// 1F1B (PipeDream-Flush) at uniform cost, free transfers: makespan (m + p - 1)(f + b); rank 0
// holds min(p, m) microbatches at its peak, the last rank one.
TEST(EngineLimits, TenThousandRanks) {
  constexpr int kRanks = 10'000, kMicrobatches = 8;
  const schedules::Schedule s = Make("1f1b", kRanks, kMicrobatches);
  const RunRecord run = Simulate(s, Uniform(kRanks, kMs, kMs, kMs), Node(kRanks), SimConfig{});
  const schedules::ScheduleMetrics m = schedules::ComputeMetrics(s, run, 1);
  EXPECT_EQ(m.makespan_ns, (kMicrobatches + kRanks - 1) * 3 * kMs);
  EXPECT_NEAR(m.bubble_fraction, 1 - 8.0 * 3 / (10'007 * 3), 1e-12);
  EXPECT_EQ(run.ranks.front().peak_inflight, kMicrobatches);
  EXPECT_EQ(run.ranks.back().peak_inflight, 1);
}

// One rank, 8766 microbatches of F + B = 1 h: a makespan of one year exactly.
TEST(EngineLimits, ARunOfOneYearAndNoLonger) {
  const schedules::Schedule s = Make("gpipe", 1, 8766);
  const int64_t half_hour = kMaxOpNs / 2;
  const RunRecord run = Simulate(s, Uniform(1, half_hour, half_hour, 0), Node(1), SimConfig{});
  EXPECT_EQ(run.end_ns - run.start_ns, kMaxRunNs);
  EXPECT_NE(ErrorOf([&] { Simulate(s, Uniform(1, half_hour + 1, half_hour, 0), Node(1), SimConfig{}); }), "");
}

// GPipe runs all 16,384 forwards before any backward: 16,384 activations of 1 PiB are 2^64
// bytes. The peak saturates at int64's end and is an OOM; every byte is freed again exactly.
TEST(EngineLimits, MemoryPastInt64Saturates) {
  const schedules::Schedule s = Make("gpipe", 1, 1 << 14);
  const CostTable costs = testing::WithMemory(Uniform(1, 1, 1, 1), kMaxValueBytes, 100, 10, 1);
  SimConfig config;
  config.rank_memory_bytes.assign(static_cast<size_t>(s.ranks()), int64_t{80} << 30);
  const RunRecord run = Simulate(s, costs, Node(1), config);
  EXPECT_EQ(run.ranks[0].peak_memory_bytes, std::numeric_limits<int64_t>::max());
  EXPECT_TRUE(run.ranks[0].oom);
  ASSERT_FALSE(run.ranks[0].memory.empty());
  EXPECT_EQ(run.ranks[0].memory.back().bytes, 111);
}

}  // namespace
}  // namespace stagecraft::sim
