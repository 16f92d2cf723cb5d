// The runtime's op clock (exec/src/op_clock.cpp): where the stamps are resolved (hand-worked op
// lists, and once per step on every rank of a real schedule), stamps on the cpu device
// turned into op times since the run's start only when resolved, and on a device that queues
// its work (queued_device.h) a resolve that waits for the device under the deadline, polling.
#include <gtest/gtest.h>

#include <chrono>
#include <memory>
#include <thread>
#include <vector>

#include "queued_device.h"
#include "stagecraft/exec/cpu_device.h"
#include "stagecraft/exec/op_clock.h"
#include "stagecraft/schedules/generators.h"
#include "stagecraft/schedules/lower.h"

namespace stagecraft::exec {
namespace {

using schedules::Op;
using schedules::OpKind;

Op At(OpKind kind, int step) { return Op{.kind = kind, .step = step}; }

std::vector<int> Points(const std::vector<bool>& after) {
  std::vector<int> at;
  for (int i = 0; i < static_cast<int>(after.size()); ++i) {
    if (after[i]) at.push_back(i);
  }
  return at;
}

TEST(ResolvePoints, AfterEachStepsLastComputeOpOrTheOpThatEndsIt) {
  // Step 1's F runs before step 0's backward and STEP.
  const std::vector<Op> ops = {At(OpKind::kF, 0), At(OpKind::kF, 1),    At(OpKind::kB, 0),
                               At(OpKind::kStep, 0), At(OpKind::kB, 1), At(OpKind::kStep, 1)};
  EXPECT_EQ(Points(ResolvePoints(ops, 2, {-1, -1})), (std::vector<int>{2, 4}));
  EXPECT_EQ(Points(ResolvePoints(ops, 2, {3, 5})), (std::vector<int>{3, 5}));
  EXPECT_EQ(Points(ResolvePoints(ops, 2, {})), (std::vector<int>{2, 4}));
  // Transfers are never resolve points; a step with no compute op here has none.
  const std::vector<Op> comms = {At(OpKind::kF, 0), At(OpKind::kSendF, 0), At(OpKind::kRecvF, 1)};
  EXPECT_EQ(Points(ResolvePoints(comms, 2, {-1, -1})), (std::vector<int>{0}));
}

TEST(ResolvePoints, OncePerStepOnEveryRankOfASchedule) {
  schedules::GeneratorParams p;
  p.ranks = 3;
  p.microbatches = 5;
  p.steps = 4;
  const schedules::Schedule s = schedules::Lower(schedules::Generate("1f1b", p));
  for (int rank = 0; rank < s.ranks(); ++rank) {
    const std::vector<int> at = Points(ResolvePoints(s.ops[rank], s.steps, {}));
    ASSERT_EQ(at.size(), 4u) << "rank " << rank;
    for (int t = 0; t < 4; ++t) EXPECT_EQ(s.ops[rank][at[t]].step, t);
  }
}

TEST(OpClock, StampsBecomeOpTimesSinceTheStartWhenResolved) {
  auto device = MakeCpuDevice();
  const std::vector<Op> ops = {At(OpKind::kRecvF, 0), At(OpKind::kF, 0), At(OpKind::kB, 0)};
  OpClock clock(*device, ResolvePoints(ops, 1, {}));
  EXPECT_FALSE(clock.ResolvesAfter(1));
  EXPECT_TRUE(clock.ResolvesAfter(2));
  clock.Start();
  EXPECT_GE(clock.Now(), 0);
  std::this_thread::sleep_for(std::chrono::milliseconds(1));
  const int f = clock.Begin();
  std::this_thread::sleep_for(std::chrono::milliseconds(2));
  clock.End(1, f);
  const int b = clock.Begin();
  clock.End(2, b);
  EXPECT_EQ(clock.pending(), 2u);

  schedules::RankRecord record;
  record.ops.assign(ops.size(), schedules::OpTiming{});
  clock.Resolve(&record);
  EXPECT_EQ(clock.pending(), 0u);
  const schedules::OpTiming fwd = record.ops[1], bwd = record.ops[2];
  EXPECT_GE(fwd.start_ns, 1'000'000);          // after the first sleep
  EXPECT_GE(fwd.end_ns - fwd.start_ns, 2'000'000);  // around the second
  EXPECT_GE(bwd.start_ns, fwd.end_ns);
  EXPECT_GE(bwd.end_ns, bwd.start_ns);
  EXPECT_LE(bwd.end_ns, clock.Now());
  EXPECT_EQ(record.ops[0].start_ns, schedules::OpTiming{}.start_ns) << "a transfer is not stamped";

  // A second resolve sets only what was stamped since.
  const int again = clock.Begin();
  clock.End(1, again);
  clock.Resolve(&record);
  EXPECT_GE(record.ops[1].start_ns, bwd.end_ns);
  EXPECT_EQ(record.ops[2], bwd) << "the backward stamped before stays";
}

// The device reaches the step's end only after the host has asked a few times: Resolve polls
// until it has, then reads the times.
TEST(OpClock, ResolveWaitsForTheDeviceToReachItsLatestStamp) {
  testing::QueuedDevice gpu;
  const std::vector<Op> ops = {At(OpKind::kF, 0), At(OpKind::kSendF, 0)};
  OpClock clock(gpu, ResolvePoints(ops, 1, {}), std::chrono::seconds(10));
  clock.Start();
  gpu.queue_ns = 100'000;
  const int f = clock.Begin();
  gpu.queue_ns = 700'000;
  clock.End(0, f);
  gpu.queue_ns = 750'000;
  clock.Mark(1);
  gpu.reached_ns = 0;  // the device is behind ...
  gpu.catch_up_after = 3;  // ... until the fourth poll
  schedules::RankRecord record = testing::EmptyRecord(ops.size());
  clock.Resolve(&record);
  EXPECT_EQ(gpu.reached_polls, 4);
  EXPECT_EQ(record.ops[0], (schedules::OpTiming{100'000, 700'000}));
  EXPECT_EQ(record.ops[1].start_ns, 750'000);
}

// A device that never gets there (its queue waits for a receive that never comes): the resolve
// gives up at the deadline, not before, with a TimeoutError for the runtime to name.
TEST(OpClock, ResolveGivesUpOnADeviceThatNeverGetsThereAtTheDeadline) {
  testing::QueuedDevice gpu;
  const std::vector<Op> ops = {At(OpKind::kF, 0)};
  const auto deadline = std::chrono::milliseconds(30);
  OpClock clock(gpu, ResolvePoints(ops, 1, {}), deadline);
  clock.Start();
  gpu.queue_ns = 500'000;
  const int f = clock.Begin();
  clock.End(0, f);
  gpu.reached_ns = 400'000;  // short of the forward's start
  schedules::RankRecord record = testing::EmptyRecord(ops.size());
  const auto start = std::chrono::steady_clock::now();
  try {
    clock.Resolve(&record);
    FAIL() << "returned";
  } catch (const TimeoutError& e) {
    EXPECT_EQ(std::string(e.what()), "the device did not get there within 0.03 s: it is hung, or its queue waits "
                                     "for another rank's work that never came");
  }
  EXPECT_GE(std::chrono::steady_clock::now() - start, deadline);
  EXPECT_GT(gpu.reached_polls, 1);
  EXPECT_LT(record.ops[0].start_ns, 0) << "nothing read back";
}

}  // namespace
}  // namespace stagecraft::exec
