// Metrics of one schedule's run, predicted or measured, with the definitions of DESIGN.md §4:
// one typed record that simulate, execute, compare and the viewer share (written and read by
// metrics_json.h), computed from the run's RunRecord.
#pragma once

#include <atomic>
#include <cstdint>
#include <iterator>
#include <optional>
#include <string>
#include <vector>

#include "stagecraft/schedules/ir.h"
#include "stagecraft/schedules/staleness.h"
#include "stagecraft/schedules/run_record.h"

namespace stagecraft::schedules {

struct RankMetrics {
  int rank = 0;
  double busy_ms = 0;
  double span_ms = 0;  // first F start to last compute end on this rank
  int64_t peak_memory_bytes = 0;
  int peak_inflight_microbatches = 0;
  int peak_weight_versions = 0;
  bool oom = false;
  // The rank's makespan split by cause (bubble_split.h); the six sum to makespan_ms.
  double compute_ms = 0;     // compute ops (= busy_ms)
  double wait_ms = 0;        // blocked on a peer that had not yet sent
  double transfer_ms = 0;    // blocked while the data was in flight
  double overhead_ms = 0;    // runtime work between ops
  double idle_ms = 0;        // before the first op and after the last
  // A STEP blocked on its REDUCE_GRAD (0 with one replica). Last, so that brace lists of the
  // older fields still mean what they did.
  double collective_ms = 0;
  // With ranks sharing its device (pipeline.ranks_per_device > 1): the peak of their memory
  // together, what `oom` is judged on; -1 (and absent from the JSON) when the device is its own.
  int64_t device_peak_memory_bytes = -1;
  // With ranks sharing its device: the device (its index in the job's placement), which the
  // trace names beside the rank; -1 (and absent from the JSON) when the device is its own.
  int device = -1;
  // With copies to host memory in its list (pipeline.offload): the peak it holds there, and the
  // part of the split a compute op waited for a RELOAD (a seventh part: the seven then sum to
  // makespan_ms); -1 and 0, both absent from the JSON, for a rank that copies nothing.
  int64_t peak_host_memory_bytes = -1;
  double offload_wait_ms = 0;
  friend bool operator==(const RankMetrics&, const RankMetrics&) = default;
};

// What only the executor measures (docs/executor.md, "Output").
struct ExecutorMetrics {
  std::vector<double> losses;     // mean loss per step
  // Each step's time in ms: from the previous step's end (the run's start for step 0) to the
  // end of its last op of that step (the last STEP on every flush schedule).
  std::vector<double> step_ms;
  double overhead_ns_per_op = 0;  // the ranks' overhead_ms over all their ops
  // training.target_loss (DESIGN.md §10), when stated: the first step (0-based) whose mean loss
  // over the last loss_window steps is at most the target, and the wall time from the run's start
  // to that step's end; -1 for both while not reached (null in the JSON). MarkTargetLoss sets them.
  std::optional<double> target_loss;
  int loss_window = 1;
  int target_reached_step = -1;
  double time_to_target_ms = -1;
  friend bool operator==(const ExecutorMetrics&, const ExecutorMetrics&) = default;
};

// Fills `e`'s target fields from its losses and step times: a step counts once a whole window of
// `window` steps ends at it (a lucky first step alone does not reach a target).
void MarkTargetLoss(double target, int window, ExecutorMetrics* e);
// How `e` fared against its target, as execute's table, compare and the viewer print it:
// "646.316 ms at step 13" (1-based), "not reached in 20 step(s)", or "" without a target.
std::string TargetText(const ExecutorMetrics& e);

// What one microbatch's passes take on a stage: predicted, what the simulator charged (every
// pass, whether the schedule runs it or not); measured, the median of the run's ops of that
// kind on that stage (0 for a kind the schedule does not run). F, a full B, I (the input
// gradients), W (the weight gradients), and the optimizer STEP of the stage's parameters (0
// where the cost model does not time it).
struct StageCostMetrics {
  double forward_ms = 0;
  double backward_ms = 0;
  double backward_input_ms = 0;
  double backward_weight_ms = 0;
  double step_ms = 0;
  friend bool operator==(const StageCostMetrics&, const StageCostMetrics&) = default;
};

// Every pass of StageCostMetrics with its cost field, the op kind it times (op_kinds.h) and its
// JSON key, in CostField order: the one table the metrics codec, MeasuredStageCosts, compare and
// replay read.
struct StageCostField {
  CostField cost;
  OpKind kind;
  const char* key;
  double StageCostMetrics::*field;
};
constexpr StageCostField CostFieldRow(CostField cost, const char* key, double StageCostMetrics::*field) {
  return {cost, KindPricedBy(cost), key, field};
}
inline constexpr StageCostField kStageCostFields[] = {
    CostFieldRow(CostField::kForward, "forward_ms", &StageCostMetrics::forward_ms),
    CostFieldRow(CostField::kBackward, "backward_ms", &StageCostMetrics::backward_ms),
    CostFieldRow(CostField::kBackwardInput, "backward_input_ms", &StageCostMetrics::backward_input_ms),
    CostFieldRow(CostField::kBackwardWeight, "backward_weight_ms", &StageCostMetrics::backward_weight_ms),
    CostFieldRow(CostField::kStep, "step_ms", &StageCostMetrics::step_ms),
};
static_assert(sizeof(StageCostMetrics) == std::size(kStageCostFields) * sizeof(double),
              "kStageCostFields names every field of StageCostMetrics");
static_assert(std::size(kStageCostFields) == kNumCostFields, "one row per cost field");
constexpr bool StageCostFieldsInOrder() {
  for (size_t i = 0; i < std::size(kStageCostFields); ++i) {
    if (static_cast<size_t>(kStageCostFields[i].cost) != i) return false;
  }
  return true;
}
static_assert(StageCostFieldsInOrder(), "kStageCostFields[CostIndex(kind)] prices kind");

struct ScheduleMetrics {
  std::string schedule;
  int ranks = 0, chunks = 1, microbatches = 0, microbatch_size = 1, steps = 1;
  // Replicas of the pipeline (Schedule::data_parallel): with context parallelism the D x C that
  // reduce their gradients together, whose C of a context group run the same samples.
  int data_parallel = 1;
  int64_t makespan_ns = 0;
  double makespan_ms = 0;     // first op start to last op end, all ranks, whole run
  double step_time_ms = 0;    // makespan / steps
  // microbatches x microbatch_size x replicas x steps / makespan (with context parallelism, / C:
  // harness::Predict)
  double throughput_samples_per_s = 0;
  double bubble_fraction = 0;           // idle compute time / (ranks x makespan)
  // The model FLOPs per second per device (harness::ModelTflopsPerDevice: a transformer's per
  // token, an MLP's per sample, × the step's / step time / the devices the job occupies), in
  // TFLOP/s; 0 where not known (explicit costs). In simulate and execute JSON
  // `model_tflops_per_device` (DESIGN.md §10), absent at 0.
  double model_tflops_per_device = 0;
  std::vector<RankMetrics> ranks_detail;
  std::optional<ExecutorMetrics> executor;  // measured runs only
  std::vector<StageCostMetrics> stage_costs;  // one per stage ("stages" in JSON); see StageCostMetrics
  // Per stage, how stale its weights are (staleness.h WeightDelays, from the schedule alone): in
  // JSON each stage object's `weight_delay_forward`, `weight_delay_backward` and
  // `weight_versions_differ`. Empty in a file that does not state them.
  std::vector<StageDelay> weight_delays;

  int WorstMemoryRank() const;
  bool AnyOom() const;
  friend bool operator==(const ScheduleMetrics&, const ScheduleMetrics&) = default;
};

// The throughput as tables print it: at least three significant digits ("0.0408", "5.50",
// "320.0"), and "-" for a run that took no time (a zero-cost scenario), whose throughput is not
// defined (the metrics file writes 0).
std::string ThroughputText(const ScheduleMetrics& m);

// A whole metrics file: `simulate --json` (source "predicted", with `costs`) or `execute
// --json` (source "measured", with `backend`).
// How far a run that has not finished got: `execute --json OUT` keeps OUT.partial up to date
// while it runs (and leaves it when killed or failed); OUT itself only ever holds a complete run.
struct PartialRun {
  int schedules_done = 0;   // the complete schedules, which are in MetricsFile::schedules
  int schedules_total = 0;  // what the run set out to do
  std::string schedule;     // the schedule running when it was written; empty between schedules
  int steps = 0;            // that schedule's steps
  std::vector<double> losses;   // its finished steps' mean losses, in order
  std::vector<double> step_ms;  // and their step times (each from the previous step's end)
};

// A multi-model workload (DESIGN.md §10, `tasks`): where simulate placed its tasks on the devices
// (sim/workload.h). The file's `schedules` hold each task's own run, in task order, named
// "TASK/SCHEDULE".
struct WorkloadMetrics {
  std::string scheduler;  // the scenario's: "lrtf" | "sequential"
  double makespan_ms = 0;  // under it
  std::vector<double> device_busy_fraction;  // under it: each device's compute over the makespan
  double lrtf_makespan_ms = 0;        // Sharded-LRTF's, whichever the scenario names
  double sequential_makespan_ms = 0;  // the tasks one after another
  struct Task {
    std::string name;
    std::string schedule;
    int devices = 1;     // its gang; 1 for a task that moves
    int steps = 1;
    bool moves = false;  // spilled: its shards may run on any device
    double alone_ms = 0;  // all its steps on its own devices, nothing else running
    double start_ms = 0, end_ms = 0;  // under the scenario's scheduler
    friend bool operator==(const Task&, const Task&) = default;
  };
  std::vector<Task> tasks;
  friend bool operator==(const WorkloadMetrics&, const WorkloadMetrics&) = default;
};

struct MetricsFile {
  std::string scenario;
  std::string source;
  std::optional<std::string> costs;    // the cost model simulate used
  std::optional<std::string> backend;  // the device backend execute ran on
  // The precision execute's GEMMs ran in (the scenario's training.dtype: fp32, tf32, bf16, fp16),
  // which the device's peak that its model FLOPs are held against depends on. Absent in older files.
  std::optional<std::string> precision;
  // What a measured run ran: the scenario file (absolute) and its --set overrides, so that
  // `stagecraft replay` rebuilds it. Absent in older files.
  std::optional<std::string> scenario_file;
  std::vector<std::string> overrides;
  std::vector<ScheduleMetrics> schedules;
  std::optional<PartialRun> partial;   // set only in a partial run's file
  std::optional<WorkloadMetrics> workload;  // a multi-model workload's (simulate only)

  const ScheduleMetrics* Find(const std::string& schedule) const;
};

// A prediction's error against a measured run, in two parts, by way of the run's replay from its
// own op and transfer times (`stagecraft replay`): the cost drift (prediction − replay: the run's
// ops took other times than the prediction's costs) and the model's error (replay − measurement:
// what the simulator's model of the schedule misses). Step-time parts in % of the measured step
// time, bubble parts in percentage points; each pair adds up to the whole error. `compare
// --trace` and the viewer's summary both use it.
struct ErrorSplit {
  double cost_drift_pct = 0;
  double model_error_pct = 0;
  double cost_drift_pp = 0;   // of the bubble
  double model_error_pp = 0;
  double replay_step_ms = 0;
  double replay_bubble = 0;   // the replay's bubble fraction
};
ErrorSplit SplitError(const ScheduleMetrics& predicted, const ScheduleMetrics& replay, const ScheduleMetrics& measured);

// Per stage, the median duration of the run's F, B, I, W and STEP ops (StageCostMetrics).
std::vector<StageCostMetrics> MeasuredStageCosts(const Schedule& s, const RunRecord& result);

// The record is one replica's; the schedule's data_parallel replicas run alongside it, so the
// throughput counts the samples of all of them. `stop` as SplitBubbles's (bubble_split.h).
ScheduleMetrics ComputeMetrics(const Schedule& schedule, const RunRecord& result, int microbatch_size,
                               const std::atomic<bool>* stop = nullptr);

// The executor's own numbers: the losses of a measured record, and its overhead per op from
// `metrics` (ComputeMetrics of the same record).
ExecutorMetrics ComputeExecutorMetrics(const Schedule& schedule, const RunRecord& measured,
                                       const ScheduleMetrics& metrics);

}  // namespace stagecraft::schedules
