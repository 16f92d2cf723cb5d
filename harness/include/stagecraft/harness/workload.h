// A multi-model workload (`tasks:`, DESIGN.md §10): each task simulated alone on the scenario's
// topology, its run cut into the units sim/workload.h places (a spilled task's shard turns, any
// other task's whole run), and the tasks placed on the devices under Sharded-LRTF and one after
// another. What simulate prints, writes as JSON (`workload`) and draws as a trace of the devices.
#pragma once

#include <string>
#include <vector>

#include "stagecraft/harness/predict.h"
#include "stagecraft/scenario/scenario.h"
#include "stagecraft/schedules/metrics.h"
#include "stagecraft/schedules/trace.h"
#include "stagecraft/sim/topology.h"
#include "stagecraft/sim/workload.h"

namespace stagecraft::harness {

// The most shard turns a workload's moving tasks may have in all (steps × 2 × shards each).
inline constexpr int64_t kMaxWorkloadUnits = int64_t{1} << 21;

struct TaskRun {
  std::string name;
  sim::Scenario scenario;  // the task alone (TaskScenario), with the steps its run simulated
  Prediction prediction;   // one step of its schedule, or two when it trains more (the second is
                           // the steady one its later steps repeat)
  int steps = 1;           // the task's
  bool moves = false;      // spilled on one device: its shards may run on any device
  int units_per_step = 1;  // of its units (sim::WorkloadTask); a task that does not move: its one
};

struct WorkloadPrediction {
  int devices = 0;  // the topology's
  std::vector<TaskRun> tasks;
  std::vector<sim::WorkloadTask> work;  // by task: its units
  sim::WorkloadSchedule lrtf, sequential;
  const sim::WorkloadSchedule& Chosen(sim::TaskScheduler scheduler) const {
    return scheduler == sim::TaskScheduler::kSequential ? sequential : lrtf;
  }
};

// The units of a task's run of `steps` steps from its prediction (one or two simulated steps):
// a moving task's maximal runs of compute ops on one shard in one direction (a shard's forward,
// its backward with its optimizer step), each from the end of the one before; warm as simulated,
// cold with its wait for its shard replaced by the shard's weights and optimizer state brought in
// alone over the host link (twice that when the shard stayed resident: sent back from the device
// it was on, then brought in). Any other task: one unit, all its steps, on the devices of
// `pipeline` (its layout).
sim::WorkloadTask WorkOf(const std::string& name, const Prediction& prediction, const sim::Topology& topology,
                         const sim::PipelineSpec& pipeline, int steps, bool moves);

// Throws InputError when the workload cannot be placed: the tasks' host memory together beyond
// the node's (topology.host.memory), or more shard turns than kMaxWorkloadUnits (tasks[i].steps).
WorkloadPrediction PredictWorkload(const sim::Scenario& scenario, const sim::Topology& topology);

// The metrics file simulate --json writes for a workload: each task's run ("TASK/SCHEDULE") and
// the workload's placement under the scenario's scheduler.
schedules::MetricsFile PredictedWorkloadFile(const sim::Scenario& scenario, const WorkloadPrediction& workload);

// The devices' lanes under the scenario's scheduler: each unit a compute op on its device's
// lane (F for a forward shard turn, B for a backward one or a whole run), its stage the shard,
// its microbatch its task's index, its step the task's step; the trace names the tasks.
schedules::Trace WorkloadTrace(const sim::Scenario& scenario, const WorkloadPrediction& workload);

// What simulate prints for a workload: each task alone, then the two schedulers side by side and
// the devices' busy fractions.
std::string WorkloadText(const sim::Scenario& scenario, const WorkloadPrediction& workload);

}  // namespace stagecraft::harness
