// Costs from a measured run (`stagecraft replay`, DESIGN.md §9): what the run's own trace says
// its ops took, in place of the cost model's times, so that a prediction differs from the
// measurement only by the simulator's model of the schedule (dependencies, transfers,
// overheads), not by the machine's speed having moved since it was profiled.
#pragma once

#include <string>
#include <vector>

#include "stagecraft/harness/predict.h"
#include "stagecraft/schedules/ir.h"
#include "stagecraft/schedules/metrics.h"
#include "stagecraft/schedules/trace.h"
#include "stagecraft/sim/cost_table.h"

namespace stagecraft::harness {

// `base` (the scenario's costs for `schedule`: its sizes and transfers stay) with the times of
// the measured run `measured` (its metrics; `trace_path` names its trace):
// - every stage's F, B, I, W and STEP: the run's median of that pass on that stage (its
//   `stage_costs`, MeasuredStageCosts; a run of B alone splits it into I and W by `base`'s
//   ratio; a run of I and W alone sums them into B), the optimizer STEP with its copy included;
// - with `record` (the run itself, `schedule` being the one it ran: RecordOf its trace), op for
//   op: every compute op and STEP its own measured time (CostTable::op_ns) and the runtime work
//   measured before it (CostTable::overhead_ns), and every transfer its own, from both ends
//   posted to the receiver seeing the data (CostTable::transfer_ns, in place of the p2p fit);
// - the runtime's work per op, measured: each rank's `overhead_ms` over its ops (the rank with
//   the loss or with more receives has more; the run's `overhead_ns_per_op` where the ranks are
//   not listed), in place of any other overhead, and no random spread.
// Throws InputError (naming `trace_path`) when the run's stages are not the schedule's or a
// stage has no F.
//
// Without `record` (a what-if), `variation` stands in for what the ops' own times would say.
struct RunVariation {
  // A transfer's bytes over the run's median transfer that a receiver waited through: every
  // transfer is copied by its receiver at this rate just before its consumer (a P2pFit of no
  // latency and no overlap); 0: the cost model's transfers.
  double transfer_bytes_per_s = 0;
  double op_time_cv = 0;  // CostTable::op_time_cv
};
//
// `ran_devices` (sim::PipelineSpec::RankDevices of the run; empty: a device per rank): where the
// run's ranks shared a device, each op of `record` replays with its own device time
// (WithoutSharing), and the simulator time-slices the devices of the replay's own placement;
// `transfer_devices` those of them its transfers waited for (the same-run replay's transfers
// less the time another rank held the device: only where copies hold the device's compute).
//
// `ran_model` (a what-if of the same stages; null: none) is the cost model's table for the
// schedule the run ran: the run gives each pass's level, the model how it changes from that
// schedule to this one. Each measured pass is scaled by the model's pass in `base` over the
// same pass in `ran_model` (a profile's STEP of a PipeDream-style schedule against 1F1B's, its
// in-pipeline factors), and a run of B alone gives I and W as the model's I and W over its B
// (a profile measures I and W apart; the other models split by their FLOPs).
sim::CostTable ReplayCosts(const schedules::Schedule& schedule, sim::CostTable base,
                           const schedules::ScheduleMetrics& measured, const std::string& trace_path,
                           const schedules::RunRecord* record, const RunVariation& variation,
                           const sim::CostTable* ran_model = nullptr, const std::vector<int>& ran_devices = {},
                           const std::vector<int>& transfer_devices = {});

// A measured trace as replay and compare --trace read it: the file at `path` (at most
// kMaxJsonBytes), every event usable (schedules::TraceFromJsonInFull). Throws InputError naming
// `path` and the first event that is not.
schedules::Trace ReadTraceInFull(const std::string& path);

// The trace of a run of `schedule` as its run record (FinishRunRecord'ed). Throws InputError
// (naming `trace_path`) unless the trace is of that run op for op (schedules::CheckTraceOfSchedule:
// no stray or repeated op, none of its compute ops missing).
schedules::RunRecord RecordOf(const schedules::Schedule& schedule, const schedules::Trace& trace,
                              const std::string& trace_path);

// What a run of `ran` (its metrics `measured`, its record `record`) shows beyond its pass medians
// (`medians`, its ReplayCosts): the median transfer a receiver waited through from its start to
// its arrival (harness's WaitedTransfers, as calibration takes it) as a rate, and how much an op's time
// varies from one run of it to the next against those medians (AddJitter; step 0 left out).
// `ran_devices` (the run's rank -> device where ranks shared devices, else empty): the waited
// transfers leave out the turns another rank held the receiver's device for (HeldByOthers): the
// simulator gives them again, a what-if's transfers being the receiver's copy on its compute.
RunVariation VariationOf(const schedules::Schedule& ran, const schedules::ScheduleMetrics& measured,
                         const schedules::RunRecord& record, const sim::CostTable& medians,
                         const std::vector<int>& ran_devices = {});

// The run's per-stage pass medians (`run`, its stages holding `run_layers` layers each, in model
// order) over another split of the same layers (`layers`): each layer takes an equal share of
// its run stage's time for every pass, and a stage of the new split sums the shares of its
// layers. What a stage does beside its layers (the first stage's input copy, the last stage's
// loss) is spread over that stage's layers the same way. Throws InputError when the two splits
// are not of the same number of layers.
std::vector<schedules::StageCostMetrics> RestageCosts(const std::vector<schedules::StageCostMetrics>& run,
                                                      const std::vector<int>& run_layers,
                                                      const std::vector<int>& layers);

// A measured run replayed: the scenario it ran (`run`'s scenario_file and overrides), the
// trace's schedule unless `sets` names others, then `sets`; every schedule predicted with
// ReplayCosts, op for op where it is the trace's run. Throws InputError when `run` is not a
// measured file that says what it ran, `trace` is not a measured trace of one of its schedules,
// or the scenario no longer loads.
struct Replay {
  sim::Scenario scenario;
  const schedules::ScheduleMetrics* measured = nullptr;  // the trace's schedule in `run`
  std::vector<Prediction> predictions;
};
Replay ReplayRun(const schedules::MetricsFile& run, const std::string& run_path, const schedules::Trace& trace,
                 const std::string& trace_path, const std::vector<std::string>& sets, int64_t max_ops);

}  // namespace stagecraft::harness
