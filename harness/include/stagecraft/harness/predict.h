// Which schedules a scenario asks for (named, size-checked, generated, lowered and validated)
// and the simulator's prediction of each on the scenario's topology: what simulate prints and
// what execute plans with.
#pragma once

#include <atomic>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "stagecraft/schedules/ir.h"
#include "stagecraft/schedules/metrics.h"
#include "stagecraft/schedules/run_record.h"
#include "stagecraft/schedules/trace.h"
#include "stagecraft/sim/cost_table.h"
#include "stagecraft/scenario/scenario.h"
#include "stagecraft/sim/topology.h"

namespace stagecraft::harness {

// The names of the scenario's schedules, without building them: the listed ones (LoadScenario
// has checked them), or under "all" every generator the shape allows, with the others named on
// stderr when `report_skipped`. Throws InputError when no schedule can take the shape.
std::vector<std::string> ScenarioScheduleNames(const sim::Scenario& scenario, bool report_skipped);

// Before any schedule is built: the estimated size of each named schedule, and of all of them
// held at once, against `max_ops` (schedules/budget.h; a schedule file counts its one step
// times pipeline.steps). Throws InputError naming the estimate, the limit and --max-ops.
void CheckScheduleSizes(const sim::PipelineSpec& pipeline, const std::vector<std::string>& names, int64_t max_ops);

// The named schedules (ScenarioScheduleNames), lowered and validated; a schedule file is
// imported as scenario.h says. A generator that schedules by costs (zb-1p, zb-2p) gets every
// stage alike from the pipeline alone, and the scenario's own costs (PassCostsFor) from the
// scenario. `cancel` stops the search that makes `auto` (SearchOptions::cancel).
std::vector<schedules::Schedule> ScenarioSchedules(const sim::PipelineSpec& pipeline,
                                                   const std::vector<std::string>& names);
std::vector<schedules::Schedule> ScenarioSchedules(const sim::Scenario& scenario,
                                                   const std::vector<std::string>& names,
                                                   const std::atomic<bool>* cancel = nullptr);

// What a cost-aware generator schedules `params` by: each stage's F, B (input gradient) and W
// times under the scenario's cost model (taken on a ZB-H1 of the same shape, which runs every
// pass apart); the longest transfer between neighbouring ranks (the profile's p2p fit, else the
// topology's route and the scenario's p2p latency); memory: F adds the stage's stashed
// activations, B frees them and keeps the W stash, W frees that (every stage alike, F +1,
// B -1/2, W -1/2, when the model gives no sizes).
schedules::StagePassCosts PassCostsFor(const sim::Scenario& scenario, const schedules::GeneratorParams& params);
// The same from the stages' cost table (one stage per rank, as a ZB-H1 of the shape runs them)
// already built, on the scenario's topology.
schedules::StagePassCosts PassCostsFor(const sim::Scenario& scenario, const sim::CostTable& costs,
                                       const sim::Topology& topology);

// Whether the cost model gives every stage's activation size (a model or a profile does;
// explicit per-rank costs do not).
bool HasSizes(const sim::CostTable& costs);
// What a rank holds for `stage` whatever its op order: weights, gradients, optimizer state, the
// largest op's workspace and the receive buffers (2 · pipeline.p2p_buffers sends). zb-auto's
// and the search's memory limits are the rank's memory less this.
int64_t OrderIndependentBytes(const sim::Scenario& scenario, const sim::StageCost& stage);

// The simulator's prediction of one of the scenario's schedules on its topology, with its
// device memory (simulate prints it; execute refuses a schedule predicted not to fit).
struct Prediction {
  schedules::Schedule schedule;
  schedules::RunRecord result;
  schedules::ScheduleMetrics metrics;
  std::string cost_source;
  sim::CostTable costs;  // what the simulation charged, per stage
  // With replicas: the longest of the stages' gradient all-reduces, each alone (its plan,
  // sim/collectives.h), that is the least a REDUCE_GRAD of that stage takes.
  struct GradientReduce {
    std::string algorithm;  // "ring", "tree", "hierarchical" or "measured"
    double alone_ns = 0;
    int stage = -1;
  };
  std::optional<GradientReduce> gradient_reduce;
};

// A rank's memory by term, as the cost model charges it: each local stage's weights times its
// most live versions, gradients and optimizer state; the most activations it holds at once
// (each F's from the F to its B or I, in the rank's op order) and how many stage-microbatches
// they are; `other` is the rest of the simulated peak (W stashes, transfer buffers, what an op
// holds while it runs, recompute buffers, and the state of spilled stages, which starts on the
// host and visits the device), 0 when the terms' peaks do not coincide.
struct MemoryTerms {
  int64_t weights = 0, gradients = 0, optimizer = 0, activations = 0, other = 0;
  int inflight = 0;  // the stage-microbatches whose activations make `activations`
  // The largest term, as a clause: "activations dominate", "the optimizer state dominates", ...
  std::string Dominant() const;
};
MemoryTerms MemoryTermsOf(const Prediction& prediction, int rank);
// Whether copies between device and host memory hold the scenario's devices' compute
// (DeviceSpec::copy_engine false: a CPU core copies on the core its ranks compute on), so that a
// copy or a transfer of ranks sharing a device waits while another of them computes; false where
// a copy engine carries them beside the compute (a GPU). sim::SimConfig::copies_hold_compute.
bool CopiesHoldCompute(const sim::Scenario& scenario);
// The model FLOPs per second per device of a run of `schedule` at `step_time_ms` a step, in
// TFLOP/s (ScheduleMetrics::model_tflops_per_device): a transformer's per token
// (sim::TransformerModelFlopsPerToken) or an MLP's per sample (sim::MlpModelFlopsPerSample) ×
// the step's tokens or samples over every replica, over the devices the job occupies
// (PipelineSpec::devices(): ranks sharing a device count it once). 0 for a model of explicit
// costs or a step of no time. The prediction and the measurement both state theirs by it.
double ModelTflopsPerDevice(const sim::Scenario& scenario, const schedules::Schedule& schedule, double step_time_ms);
// `stop`, when set by another thread, ends the prediction early (base/stop.h): it throws
// StopRequested.
Prediction Predict(const sim::Scenario& scenario, const sim::Topology& topology, schedules::Schedule schedule,
                   const std::atomic<bool>* stop = nullptr);
// The same with the costs given (a replay's, replay.h) instead of the scenario's cost model.
Prediction Predict(const sim::Scenario& scenario, const sim::Topology& topology, schedules::Schedule schedule,
                   sim::CostTable costs, const std::atomic<bool>* stop = nullptr);

// The metrics file of `predictions` of `scenario` (source "predicted", `costs` their cost
// source), as simulate --json writes it through the metrics codec.
schedules::MetricsFile PredictedMetricsFile(const sim::Scenario& scenario, const std::string& costs,
                                            const std::vector<Prediction>& predictions);

// The predicted trace of `prediction` of `scenario` (`costs` its cost source), as simulate
// --trace writes it.
schedules::Trace PredictedTrace(const sim::Scenario& scenario, const std::string& costs, const Prediction& prediction);

// Throws InputError when the simulator predicts that a schedule of `predictions` exceeds the
// scenario's device memory, naming each such schedule with every rank's predicted peak.
void RefusePredictedOom(const sim::Scenario& scenario, const std::vector<Prediction>& predictions);

}  // namespace stagecraft::harness
