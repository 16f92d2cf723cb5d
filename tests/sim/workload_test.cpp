// Sharded-LRTF and the sequential baseline (sim/workload.h) against placements worked out by hand
// from the rule: whenever a device is free, the waiting task with the longest remaining time takes
// it (its own last device first, a device no other waiting task left its shard on next); a unit
// after its task's previous unit on the same device costs its warm time, any other its cold time.
#include <stdexcept>
#include <vector>

#include <gtest/gtest.h>

#include "stagecraft/sim/workload.h"

namespace stagecraft::sim {
namespace {

// A task that moves, its units `warm` each, cold 5 more.
WorkloadTask Moving(const char* name, std::vector<int64_t> warm) {
  WorkloadTask t;
  t.name = name;
  t.moves = true;
  for (int64_t w : warm) t.units.push_back(WorkUnit{w, w + 5, w / 2, 0, false});
  return t;
}

WorkloadTask Gang(const char* name, int devices, int64_t ns) {
  WorkloadTask t;
  t.name = name;
  t.devices = devices;
  t.units.push_back(WorkUnit{ns, ns, ns, 0, true});
  return t;
}

TEST(Workload, TwoTasksOnTwoDevicesRunSideBySideWarm) {
  const std::vector<WorkloadTask> tasks = {Moving("a", {10, 10, 10}), Moving("b", {10, 10, 10})};
  const WorkloadSchedule lrtf = ScheduleWorkload(tasks, 2, TaskScheduler::kLrtf);
  EXPECT_EQ(lrtf.makespan_ns, 30);
  // Each stays where it started: a on the highest device, b on the other.
  for (const UnitRun& r : lrtf.runs) {
    EXPECT_FALSE(r.cold);
    EXPECT_EQ(r.device, 1 - r.task);
  }
  // Compute 5 of each 10.
  EXPECT_DOUBLE_EQ(lrtf.device_busy_fraction[0], 0.5);
  EXPECT_DOUBLE_EQ(lrtf.device_busy_fraction[1], 0.5);
  const WorkloadSchedule seq = ScheduleWorkload(tasks, 2, TaskScheduler::kSequential);
  EXPECT_EQ(seq.makespan_ns, 60);
  EXPECT_EQ(seq.task_start_ns[1], 30);
  EXPECT_DOUBLE_EQ(seq.device_busy_fraction[0], 0.5);
  EXPECT_DOUBLE_EQ(seq.device_busy_fraction[1], 0.0);
}

// Three tasks on two devices, worked by hand:
//   t=0:  a (30 left) takes device 1 (the highest), b (20) device 0; c waits.
//   t=10: a (20) stays on 1 warm; c (20, its first unit: warm anywhere) takes 0, which b (10)
//         left but is not waiting ahead of it; b waits.
//   t=20: a (10) stays on 1; b's device 0 now last ran c, so b runs there cold: 20..35.
//   t=30: a is done; c (10) takes free device 1 cold: 30..45.
TEST(Workload, ThreeTasksOnTwoDevicesByHand) {
  const std::vector<WorkloadTask> tasks = {Moving("a", {10, 10, 10}), Moving("b", {10, 10}), Moving("c", {10, 10})};
  const WorkloadSchedule s = ScheduleWorkload(tasks, 2, TaskScheduler::kLrtf);
  ASSERT_EQ(s.runs.size(), 7u);
  struct Expect {
    int task, unit, device;
    int64_t start, end;
    bool cold;
  };
  const Expect expected[] = {{0, 0, 1, 0, 10, false},  {1, 0, 0, 0, 10, false},  {0, 1, 1, 10, 20, false},
                             {2, 0, 0, 10, 20, false}, {0, 2, 1, 20, 30, false}, {1, 1, 0, 20, 35, true},
                             {2, 1, 1, 30, 45, true}};
  for (size_t i = 0; i < s.runs.size(); ++i) {
    SCOPED_TRACE(i);
    const UnitRun& r = s.runs[i];
    EXPECT_EQ(r.task, expected[i].task);
    EXPECT_EQ(r.unit, expected[i].unit);
    EXPECT_EQ(r.device, expected[i].device);
    EXPECT_EQ(r.start_ns, expected[i].start);
    EXPECT_EQ(r.end_ns, expected[i].end);
    EXPECT_EQ(r.cold, expected[i].cold);
  }
  EXPECT_EQ(s.makespan_ns, 45);
  EXPECT_EQ(s.task_end_ns[1], 35);
  EXPECT_EQ(ScheduleWorkload(tasks, 2, TaskScheduler::kSequential).makespan_ns, 70);
}

// A pipeline task holds an aligned block of devices for its whole run; the moving tasks fill the rest.
TEST(Workload, GangHoldsAnAlignedBlockAndOthersBackfill) {
  const std::vector<WorkloadTask> tasks = {Moving("m", {10, 10}), Gang("g", 2, 100), Moving("n", {30})};
  const WorkloadSchedule s = ScheduleWorkload(tasks, 3, TaskScheduler::kLrtf);
  // g (100 left) first: devices 0-1. n (30) next: device 2. m (20) waits until n ends at 30,
  // then runs on device 2 (its first unit warm, its second warm after it): 30..50.
  ASSERT_EQ(s.runs.size(), 4u);
  EXPECT_EQ(s.runs[0].task, 1);
  EXPECT_EQ(s.runs[0].device, 0);
  EXPECT_EQ(s.runs[0].devices, 2);
  EXPECT_EQ(s.runs[1].task, 2);
  EXPECT_EQ(s.runs[1].device, 2);
  EXPECT_EQ(s.task_start_ns[0], 30);
  EXPECT_EQ(s.task_end_ns[0], 50);
  EXPECT_EQ(s.makespan_ns, 100);
  EXPECT_DOUBLE_EQ(s.device_busy_fraction[0], 1.0);
  EXPECT_DOUBLE_EQ(s.device_busy_fraction[2], (15 + 5 + 5) / 100.0);
}

// A gang of two on three devices fits only on devices 0-1 (the aligned block), so a second gang
// waits for the first however device 2 stands.
TEST(Workload, GangsWaitForAnAlignedBlock) {
  const std::vector<WorkloadTask> tasks = {Gang("g1", 2, 40), Gang("g2", 2, 30)};
  const WorkloadSchedule s = ScheduleWorkload(tasks, 3, TaskScheduler::kLrtf);
  EXPECT_EQ(s.task_start_ns[1], 40);
  EXPECT_EQ(s.makespan_ns, 70);
  EXPECT_DOUBLE_EQ(s.device_busy_fraction[2], 0.0);
}

TEST(Workload, UnitsOfNoTimeDoNotStall) {
  const std::vector<WorkloadTask> tasks = {Moving("z", {0, 0, 0}), Moving("a", {10})};
  EXPECT_EQ(ScheduleWorkload(tasks, 1, TaskScheduler::kLrtf).makespan_ns, 10);
}

TEST(Workload, RefusesWhatCannotBePlaced) {
  EXPECT_THROW(ScheduleWorkload({Gang("g", 4, 10)}, 2, TaskScheduler::kLrtf), std::invalid_argument);
  WorkloadTask empty = Moving("e", {});
  EXPECT_THROW(ScheduleWorkload({empty}, 1, TaskScheduler::kLrtf), std::invalid_argument);
  WorkloadTask two = Gang("g", 1, 10);
  two.units.push_back(two.units.front());
  EXPECT_THROW(ScheduleWorkload({two}, 1, TaskScheduler::kLrtf), std::invalid_argument);
  WorkloadTask fast = Moving("f", {10});
  fast.units[0].cold_ns = 5;  // cold cheaper than warm
  EXPECT_THROW(ScheduleWorkload({fast}, 1, TaskScheduler::kLrtf), std::invalid_argument);
}

}  // namespace
}  // namespace stagecraft::sim
