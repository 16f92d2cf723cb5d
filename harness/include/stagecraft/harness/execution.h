// A scenario's schedules run for real on this rank (DESIGN.md §5): planned with every input
// check made before any work (the schedules built, their layer splits, the simulator's
// predicted peaks held against the device's and this node's memory), then run one after the
// other with the set-up outside every deadline, each rank's measurements gathered on rank 0.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "stagecraft/exec/backend.h"
#include "stagecraft/exec/device.h"
#include "stagecraft/exec/replica_group.h"
#include "stagecraft/exec/runtime.h"
#include "stagecraft/exec/transport.h"
#include "stagecraft/harness/measure.h"
#include "stagecraft/harness/progress.h"
#include "stagecraft/schedules/ir.h"
#include "stagecraft/scenario/scenario.h"

namespace stagecraft::harness {

struct ExecutionPlan {
  sim::Scenario scenario;
  exec::TrainingConfig config;
  exec::Backend backend = exec::Backend::kCpu;
  std::vector<std::string> names;  // the schedules, in order
  std::vector<schedules::Schedule> schedules;
  std::vector<std::vector<int>> layers;                    // per schedule, layers per stage
  std::vector<std::vector<int64_t>> predicted_peak_bytes;  // per schedule, per rank
  bool feeds = false, scores = false;  // this rank holds stage 0 / the last stage in some schedule
  exec::WorldLayout layout;            // pipeline.ranks x pipeline.data_parallel processes
  int replica = 0;                     // this process's replica (layout.ReplicaOf)
};

// Plans `scenario` on `backend` for rank `rank` of a job of `world` ranks, `local_ranks` of them
// on this node: the schedules named, their sizes held against `max_ops`, built, split and
// predicted. With D = pipeline.data_parallel replicas, world rank w runs pipeline rank w % P of
// replica w / P (exec::WorldLayout). Throws InputError for a world that is not pipeline.ranks ×
// pipeline.data_parallel (naming both), a scenario the executor
// cannot train, or a run predicted not to fit the device's memory (topology.device.memory) or,
// on the cpu backend, this node's (the predicted peak times the ranks here). Makes no collective
// call, so a rank that fails can leave at any point.
ExecutionPlan PlanExecution(sim::Scenario scenario, exec::Backend backend, int world, int rank, int local_ranks,
                            int64_t max_ops);

// How a run reports as it goes: `progress` (OUT.partial; disabled when its path is empty) and a
// step line printer per schedule (may be empty). With `share_done`, the complete schedules'
// metrics are broadcast after each schedule (the progress file needs them on every rank).
struct RunReporting {
  ProgressFile* progress = nullptr;
  std::function<exec::RunHooks::StepFn(const schedules::Schedule&, const exec::TrainingConfig&)> step_printer;
  bool share_done = false;
};

// Runs every planned schedule on this rank with `hooks` (fault injection; its on_step is
// replaced by the reporting). `transport` spans this replica's pipeline and `replicas` this
// pipeline rank's replicas (null with one). Rank 0 of each pipeline returns the measurements of
// its replica, in the plan's order (replica 0's are the run's: its losses the replicas' mean).
// Throws on any failure; the caller ends the job (Transport::Abort).
std::vector<MeasuredSchedule> RunSchedules(const ExecutionPlan& plan, const exec::RunHooks& hooks,
                                           exec::Device& device, exec::Transport& transport,
                                           const RunReporting& reporting, exec::ReplicaGroup* replicas = nullptr);

}  // namespace stagecraft::harness
