// Ranks that share a device (pipeline.ranks_per_device): the compute ops running on one device
// split it evenly, or take round-robin turns of the device's time slice. Oracles from outside the engine: with every rank on one device and free
// transfers, the device is never idle while work is left, so the makespan is the sum of every
// op's time (work conservation), for every generator; ops that never overlap take their own
// time; and a hand-worked GPipe where two forwards meet.
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

#include "sim_test_util.h"
#include "stagecraft/schedules/generators.h"
#include "stagecraft/schedules/metrics.h"
#include "stagecraft/schedules/metrics_json.h"
#include "stagecraft/schedules/trace.h"
#include "stagecraft/sim/engine.h"
#include "stagecraft/scenario/scenario.h"

namespace stagecraft::sim {
namespace {

using schedules::OpKind;
using schedules::Schedule;
using testing::kMs;
using testing::Node;
using testing::Uniform;

constexpr int64_t kF = 3 * kMs, kI = 2 * kMs, kW = 1 * kMs;

// The sum of every compute op's cost over the ranks (STEPs cost nothing here).
int64_t TotalWork(const Schedule& s) {
  int64_t total = 0;
  for (const auto& ops : s.ops) {
    for (const schedules::Op& op : ops) {
      total += op.kind == OpKind::kF ? kF : op.kind == OpKind::kB ? kI + kW : op.kind == OpKind::kI ? kI
               : op.kind == OpKind::kW ? kW : 0;
    }
  }
  return total;
}

schedules::RunRecord SimulateOn(const Schedule& s, std::vector<int> devices, int64_t time_slice_ns = 0) {
  SimConfig config;
  config.rank_devices = std::move(devices);
  config.time_slice_ns = time_slice_ns;
  return Simulate(s, Uniform(s.stages(), kF, kI, kW), Node(s.ranks()), config);
}

TEST(SharedDevice, EveryRankOnOneDeviceTakesTheSumOfTheWork) {
  int cases = 0;
  for (const schedules::GeneratorInfo& info : schedules::Generators()) {
    for (int ranks : {2, 4}) {
      for (int microbatches : {1, 4, 8}) {
        schedules::GeneratorParams params = schedules::test_cases::Params(ranks, microbatches, 2);
        params.chunks = schedules::ChunksFor(info, 0);
        if (!schedules::CheckParams(info, params).empty()) continue;
        const Schedule s = schedules::Lower(schedules::Generate(info.name, params));
        const std::vector<int> one(static_cast<size_t>(ranks), 0);
        EXPECT_EQ(SimulateOn(s, one).makespan_ns(), TotalWork(s)) << info.name << " p=" << ranks << " m=" << microbatches;
        // In turns, shorter than an op (1 ms) and longer than any (1 s): the device is as busy.
        for (const int64_t slice : {kMs, 1000 * kMs}) {
          EXPECT_EQ(SimulateOn(s, one, slice).makespan_ns(), TotalWork(s))
              << info.name << " p=" << ranks << " m=" << microbatches << " slice " << slice;
        }
        ++cases;
      }
    }
  }
  EXPECT_GT(cases, 20);
}

// One microbatch: no two ops of the pipeline are ever runnable at once, so sharing changes
// nothing: 4 forwards and 4 backwards end to end, on two devices of two ranks as on four.
TEST(SharedDevice, OpsThatNeverOverlapTakeTheirOwnTime) {
  const Schedule s = testing::Make("1f1b", 4, 1);
  EXPECT_EQ(SimulateOn(s, {0, 0, 1, 1}).makespan_ns(), 4 * (kF + kI + kW));
  EXPECT_EQ(SimulateOn(s, {}).makespan_ns(), 4 * (kF + kI + kW));
}

// GPipe, 2 ranks on one device, 2 microbatches, F = 3 ms: rank 0's F0 runs alone (0-3); then
// rank 0's F1 and rank 1's F0, 3 ms of work each, run side by side at half speed and both end
// at 9 ms, where on two devices they would end at 6.
TEST(SharedDevice, TwoForwardsThatMeetEachRunAtHalfSpeed) {
  const Schedule s = testing::Make("gpipe", 2, 2);
  auto forward_end = [&](const schedules::RunRecord& r, int rank, int mb) {
    for (size_t i = 0; i < s.ops[rank].size(); ++i) {
      const schedules::Op& op = s.ops[rank][i];
      if (op.kind == OpKind::kF && op.microbatch == mb) return r.ranks[rank].ops[i].end_ns;
    }
    return int64_t{-1};
  };
  const schedules::RunRecord shared = SimulateOn(s, {0, 0});
  EXPECT_EQ(forward_end(shared, 0, 0), 3 * kMs);
  EXPECT_EQ(forward_end(shared, 0, 1), 9 * kMs);
  EXPECT_EQ(forward_end(shared, 1, 0), 9 * kMs);
  const schedules::RunRecord apart = SimulateOn(s, {0, 1});
  EXPECT_EQ(forward_end(apart, 0, 1), 6 * kMs);
  EXPECT_EQ(forward_end(apart, 1, 0), 6 * kMs);
}

// The same GPipe in turns. Rank 0's F1 and rank 1's F0 are both ready at 3 ms.
// - A slice of 1 s, longer than an op: the first to come runs 3-6 at full speed, the other
//   waits its turn and runs 6-9 (its recorded start 6: the wait is a gap before it).
// - A slice of 1 ms: they alternate 1 ms turns, 3-4 / 4-5 / 5-6 / 6-7 / 7-8 / 8-9: the first
//   starts at 3 and ends at 8 (its 3 ms in turns 1, 3, 5), the other starts at 4 and ends at 9.
TEST(SharedDevice, TwoForwardsThatMeetTakeTurns) {
  const Schedule s = testing::Make("gpipe", 2, 2);
  const auto forward = [&](const schedules::RunRecord& r, int rank, int mb) {
    for (size_t i = 0; i < s.ops[rank].size(); ++i) {
      const schedules::Op& op = s.ops[rank][i];
      if (op.kind == OpKind::kF && op.microbatch == mb) return r.ranks[rank].ops[i];
    }
    return schedules::OpTiming{};
  };
  const auto sorted = [](int64_t a, int64_t b) { return a < b ? std::pair{a, b} : std::pair{b, a}; };
  const schedules::RunRecord serial = SimulateOn(s, {0, 0}, 1000 * kMs);
  EXPECT_EQ(forward(serial, 0, 0).start_ns, 0);
  EXPECT_EQ(forward(serial, 0, 0).end_ns, 3 * kMs);
  const schedules::OpTiming a = forward(serial, 0, 1), b = forward(serial, 1, 0);
  EXPECT_EQ(a.end_ns - a.start_ns, kF) << "a whole turn: the op's own time";
  EXPECT_EQ(b.end_ns - b.start_ns, kF);
  EXPECT_EQ(sorted(a.start_ns, b.start_ns), std::pair(3 * kMs, 6 * kMs));
  EXPECT_EQ(sorted(a.end_ns, b.end_ns), std::pair(6 * kMs, 9 * kMs));

  const schedules::RunRecord turns = SimulateOn(s, {0, 0}, kMs);
  const schedules::OpTiming c = forward(turns, 0, 1), d = forward(turns, 1, 0);
  EXPECT_EQ(sorted(c.start_ns, d.start_ns), std::pair(3 * kMs, 4 * kMs));
  EXPECT_EQ(sorted(c.end_ns, d.end_ns), std::pair(8 * kMs, 9 * kMs));
  EXPECT_EQ(c.start_ns < d.start_ns, c.end_ns < d.end_ns) << "the first to hold the device ends first";
  // On devices of their own, the slice changes nothing.
  EXPECT_EQ(forward(SimulateOn(s, {0, 1}, kMs), 1, 0).end_ns, 6 * kMs);
}

// GPipe, 2 ranks, 2 microbatches, 100 bytes of activations per stage and microbatch and 10 of
// weights: each rank peaks at 2 x 100 + 10 = 210 bytes, and both hold their two microbatches
// from rank 1's second forward until its backwards, so their device peaks at 420. A device of
// 300 bytes holds either rank alone but not the two together.
TEST(SharedDevice, MemoryIsSummedPerDevice) {
  const Schedule s = testing::Make("gpipe", 2, 2);
  const CostTable costs = testing::WithMemory(Uniform(2, kF, kI, kW), 100, 10, 0, 0);
  SimConfig config;
  config.rank_memory_bytes.assign(static_cast<size_t>(s.ranks()), 300);
  config.rank_devices = {0, 0};
  const schedules::RunRecord shared = Simulate(s, costs, Node(2), config);
  config.rank_devices = {};
  const schedules::RunRecord apart = Simulate(s, costs, Node(2), config);
  for (int r = 0; r < 2; ++r) {
    EXPECT_EQ(shared.ranks[r].peak_memory_bytes, 210) << r;
    EXPECT_EQ(shared.ranks[r].device_peak_memory_bytes, 420) << r;
    EXPECT_TRUE(shared.ranks[r].oom) << r;
    EXPECT_EQ(apart.ranks[r].peak_memory_bytes, 210) << r;
    EXPECT_EQ(apart.ranks[r].device_peak_memory_bytes, -1) << r;
    EXPECT_FALSE(apart.ranks[r].oom) << r;
    EXPECT_EQ(shared.ranks[r].device, 0) << r;
    EXPECT_EQ(apart.ranks[r].device, -1) << r;
  }
}

// The trace names each rank's shared device beside it, from the metrics it carries, and the
// metrics JSON keeps it ("device", absent for a device of its own).
TEST(SharedDevice, TheTraceAndTheMetricsNameTheDevice) {
  const Schedule s = testing::Make("gpipe", 4, 2);
  SimConfig config;
  config.rank_devices = {0, 0, 1, 2};
  const schedules::RunRecord record = Simulate(s, Uniform(4, kF, kI, kW), Node(4), config);
  const schedules::ScheduleMetrics metrics = schedules::ComputeMetrics(s, record, 1);
  ASSERT_EQ(metrics.ranks_detail.size(), 4u);
  EXPECT_EQ(metrics.ranks_detail[1].device, 0);
  EXPECT_EQ(metrics.ranks_detail[2].device, -1) << "device 1 holds rank 2 alone";
  const std::string json = schedules::TraceToJson(schedules::BuildTrace(s, record, "sc", "predicted", metrics));
  EXPECT_NE(json.find(R"j("name":"rank 0 (device 0, shared)")j"), std::string::npos);
  EXPECT_NE(json.find(R"j("name":"rank 1 (device 0, shared)")j"), std::string::npos);
  EXPECT_NE(json.find(R"j("name":"rank 2")j"), std::string::npos);
  schedules::MetricsFile file;
  file.schedules.push_back(metrics);
  const schedules::MetricsFile back = schedules::MetricsFileFromJson(schedules::MetricsFileToJson(file), "metrics.json");
  ASSERT_EQ(back.schedules.size(), 1u);
  EXPECT_EQ(back.schedules[0].ranks_detail[0].device, 0);
  EXPECT_EQ(back.schedules[0].ranks_detail[3].device, -1);
}

// pipeline.ranks_per_device k: ranks k*j .. k*j+k-1 share pipeline position j's device, and the
// job needs ranks / k devices per replica.
TEST(SharedDevice, RanksPerDevicePlacesNeighboursTogether) {
  PipelineSpec p;
  p.ranks = 4;
  p.ranks_per_device = 2;
  EXPECT_EQ(p.RankDevices(), (std::vector<int>{0, 0, 1, 1}));
  EXPECT_EQ(p.devices(), 2);
  p.data_parallel = 2;  // placement tensor, data, pipeline: replica i of position j on device 2j + i
  EXPECT_EQ(p.RankDevices(), (std::vector<int>{0, 0, 2, 2}));
  EXPECT_EQ(p.ReplicaDevices()[3], (std::vector<int>{2, 3}));
  EXPECT_EQ(p.devices(), 4);
  p.data_parallel = 1;
  p.ranks = 3;  // a last device of one rank
  EXPECT_EQ(p.RankDevices(), (std::vector<int>{0, 0, 1}));
  EXPECT_EQ(p.devices(), 2);
  p.ranks_per_device = 1;
  EXPECT_TRUE(p.RankDevices().empty());  // the pipeline alone, a device per rank
}

}  // namespace
}  // namespace stagecraft::sim
