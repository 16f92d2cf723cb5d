// A multi-model workload's tasks on a set of devices (Hydra, Nagrecha and Kumar: several models
// trained at once, their shards scheduled across the devices). Each task is a chain of units that
// run one after another; what a unit costs comes from the task's own simulated run (harness/
// workload.h), this file only places them in time. Two schedulers:
//  - Sharded-LRTF: whenever a device is free, it takes the waiting task with the longest remaining
//    time (a task whose previous unit ran on a device that is free now stays there; a moving task
//    takes the highest numbered free device, a gang the lowest free aligned block);
//  - sequential: the tasks one after another in the order listed, each alone on the devices.
// A task whose state lives on its devices (any pipeline that is not spilled) is one unit: it holds
// its devices from its first step to its last. A spilled task's state lives on the host, so its
// units (each shard's forward, each shard's backward with its optimizer step) may run on any
// device; a unit that follows its task's previous unit on the same device, with nothing else run
// there in between, runs as in the task's own run (its double-buffered prefetch and its resident
// shard hold), any other costs `cold_ns`. The host link's contention between devices is not
// modelled here (each task's costs are its own run's).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "stagecraft/scenario/scenario.h"

namespace stagecraft::sim {

struct WorkUnit {
  int64_t warm_ns = 0;  // after the task's own previous unit on the same device
  int64_t cold_ns = 0;  // on another device, or after another task's unit (>= warm_ns)
  int64_t busy_ns = 0;  // each of its devices' compute within it, the mean over a gang (<= warm_ns)
  int shard = 0;        // the stage it runs (a pipeline's whole run: 0)
  bool backward = false;
};

struct WorkloadTask {
  std::string name;
  int devices = 1;     // a gang of neighbouring devices (a pipeline's); a task that moves has 1
  bool moves = false;  // spilled: its units may run on any device
  // Its units in order; a task that does not move has exactly one.
  std::vector<WorkUnit> units;

  // All of it alone, each unit as in its own run (warm).
  int64_t AloneNs() const {
    int64_t sum = 0;
    for (const WorkUnit& u : units) sum += u.warm_ns;
    return sum;
  }
};

// One unit as placed.
struct UnitRun {
  int task = 0;
  int unit = 0;    // index in the task's units
  int device = 0;  // the first device of its gang
  int devices = 1;
  int64_t start_ns = 0;
  int64_t end_ns = 0;
  bool cold = false;
};

struct WorkloadSchedule {
  TaskScheduler scheduler = TaskScheduler::kLrtf;
  int64_t makespan_ns = 0;
  std::vector<double> device_busy_fraction;  // compute over the makespan, per device
  std::vector<int64_t> task_start_ns, task_end_ns;
  std::vector<UnitRun> runs;  // in start order
};

// The tasks placed on `devices` devices by `scheduler`. A gang of k devices is placed on an
// aligned block (devices j·k .. j·k + k − 1, the layout its own run was simulated on). Throws
// std::invalid_argument when a task needs more devices than there are, has no units, or does not
// move and has several.
WorkloadSchedule ScheduleWorkload(const std::vector<WorkloadTask>& tasks, int devices, TaskScheduler scheduler);

}  // namespace stagecraft::sim
