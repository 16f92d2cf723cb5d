// ReplayCosts (replay.h): a measured trace's op times as a cost table.
#include "stagecraft/harness/replay.h"

#include <fmt/format.h>

#include <algorithm>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <cmath>
#include <vector>

#include "stagecraft/base/error.h"
#include "stagecraft/base/input_file.h"
#include "stagecraft/base/printable.h"
#include "stagecraft/base/stats.h"
#include "stagecraft/harness/calibrate.h"
#include "stagecraft/schedules/bubble_split.h"
#include "stagecraft/schedules/edges.h"
#include "stagecraft/schedules/trace_check.h"
#include "stagecraft/schedules/unit_index.h"
#include "stagecraft/sim/cost_models.h"
#include "stagecraft/sim/layer_split.h"
#include "stagecraft/sim/scenario_checks.h"
#include "stagecraft/sim/topology.h"

namespace stagecraft::harness {

schedules::Trace ReadTraceInFull(const std::string& path) {
  return schedules::TraceFromJsonInFull(ReadInputFile(path, kMaxJsonBytes, "a trace"), path);
}

schedules::RunRecord RecordOf(const schedules::Schedule& schedule, const schedules::Trace& trace,
                              const std::string& trace_path) {
  schedules::CheckTraceOfSchedule(schedule, trace, trace_path);
  schedules::RunRecord record;
  record.ranks.resize(schedule.ops.size());
  for (size_t r = 0; r < schedule.ops.size(); ++r) record.ranks[r].ops.resize(schedule.ops[r].size());
  for (const schedules::TraceOp& op : trace.ops) {
    if (op.stream == schedules::Stream::kCollective) continue;  // a REDUCE_GRAD's own lane
    record.ranks[op.rank].ops[op.op_index] = {op.start_ns, op.start_ns + op.duration_ns};
  }
  schedules::FinishRunRecord(schedule, 0, &record);
  return record;
}

RunVariation VariationOf(const schedules::Schedule& ran, const schedules::ScheduleMetrics& measured,
                         const schedules::RunRecord& record, const sim::CostTable& medians,
                         const std::vector<int>& ran_devices) {
  RunVariation v;
  int64_t bytes = 0;  // a transfer's (the stages' boundaries are one size in the models that have layers)
  for (const sim::StageCost& c : medians.stages) bytes = std::max(bytes, c.send_bytes);
  if (std::vector<int64_t> waited = WaitedTransfers(ran, record, ran_devices); !waited.empty() && bytes > 0) {
    const int64_t median = Median(std::move(waited));
    if (median > 0) v.transfer_bytes_per_s = static_cast<double>(bytes) * 1e9 / static_cast<double>(median);
  }
  JitterSums jitter;
  AddJitter(ran, record, medians, measured.steps > 1 ? 1 : 0, &jitter);  // step 0 starts cold
  v.op_time_cv = jitter.Cv();
  return v;
}

namespace {

using schedules::CostField;
using schedules::OpKind;

// A measured time carried to another schedule: scaled by the model's pass on it against the
// same pass on the schedule that ran.
int64_t Scaled(int64_t measured_ns, int64_t model_ns, int64_t model_ran_ns) {
  if (model_ns <= 0 || model_ran_ns <= 0) return measured_ns;
  return std::llround(static_cast<double>(measured_ns) * static_cast<double>(model_ns) /
                      static_cast<double>(model_ran_ns));
}

// Each stage's passes from the run's medians (MeasuredStageCosts), scaled to this schedule.
void ReplayStageCosts(const schedules::ScheduleMetrics& measured, const std::string& trace_path,
                      const sim::CostTable* ran_model, sim::CostTable* base) {
  for (size_t st = 0; st < measured.stage_costs.size(); ++st) {
    sim::StageCost& cost = base->stages[st];
    // The run's median of each pass on this stage, -1 where it ran none.
    const auto median = [&](CostField field) -> int64_t {
      const double ms = measured.stage_costs[st].*schedules::kStageCostFields[static_cast<size_t>(field)].field;
      return ms > 0 ? std::llround(ms * 1e6) : -1;
    };
    const int64_t f = median(CostField::kForward), b = median(CostField::kBackward);
    const int64_t i = median(CostField::kBackwardInput), w = median(CostField::kBackwardWeight);
    const int64_t step = median(CostField::kStep);
    if (f < 0) throw InputError(fmt::format("{}: no F of stage {} in the run", trace_path, st));
    // The model's pass on this schedule against the same pass on the one that ran.
    const sim::StageCost& was =
        ran_model != nullptr && ran_model->stages.size() == base->stages.size() ? ran_model->stages[st] : cost;
    const sim::StageCost model = cost;
    cost.forward_ns = Scaled(f, model.forward_ns, was.forward_ns);
    if (i >= 0 && w >= 0) {
      cost.backward_input_ns = Scaled(i, model.backward_input_ns, was.backward_input_ns);
      cost.backward_weight_ns = Scaled(w, model.backward_weight_ns, was.backward_weight_ns);
      cost.fused_backward_ns = b >= 0 ? Scaled(b, model.FullBackwardNs(), was.FullBackwardNs()) : 0;
    } else if (b >= 0) {
      const int64_t model_b = model.FullBackwardNs(), ran_b = was.FullBackwardNs();
      if (model.backward_input_ns + model.backward_weight_ns > 0 && ran_b > 0) {
        cost.backward_input_ns = Scaled(b, model.backward_input_ns, ran_b);
        cost.backward_weight_ns = Scaled(b, model.backward_weight_ns, ran_b);
      } else {  // a model without the split: halves
        cost.backward_input_ns = b / 2;
        cost.backward_weight_ns = b - b / 2;
      }
      cost.fused_backward_ns = Scaled(b, model_b, ran_b);
    }
    if (step >= 0) {
      cost.step_ns = Scaled(step, model.step_ns, was.step_ns);
      cost.version_copy_ns = 0;  // a measured STEP holds its copy
    }
  }
}

// Each op's own time, and the runtime's work before it as it happened (the overhead part of the
// gap before it), so a stall of the machine on one op stays on that op instead of spreading over
// all of them. On a shared device, less the turns another rank held it for, which the simulator
// gives again.
void ReplayOpTimes(const schedules::Schedule& schedule, const schedules::RunRecord& record,
                   const std::vector<int>& ran_devices, const HeldByOthers& held, sim::CostTable* base) {
  base->op_ns.assign(schedule.ops.size(), {});
  for (size_t r = 0; r < schedule.ops.size(); ++r) base->op_ns[r].assign(schedule.ops[r].size(), -1);
  base->overhead_ns = base->op_ns;
  // Each op's own time: a shared device's time-slicing is the simulator's to apply again.
  const schedules::RunRecord own = WithoutSharing(schedule, record, ran_devices);
  // Where each compute op started on its rank, to find the op an overhead gap ends at.
  std::vector<std::unordered_map<int64_t, int>> started(schedule.ops.size());
  for (size_t r = 0; r < schedule.ops.size(); ++r) {
    for (size_t i = 0; i < schedule.ops[r].size(); ++i) {
      const schedules::OpTiming& t = record.ranks[r].ops[i];
      const OpKind kind = schedule.ops[r][i].kind;
      if (t.start_ns < 0 || !schedules::RunsOnCompute(kind)) continue;
      base->op_ns[r][i] = own.ranks[r].ops[i].end_ns - t.start_ns;
      base->overhead_ns[r][i] = 0;  // unless a gap says otherwise
      started[r][t.start_ns] = static_cast<int>(i);
    }
  }
  const std::vector<schedules::RankSplit> split = schedules::SplitBubbles(schedule, record, true);
  for (size_t r = 0; r < split.size() && r < started.size(); ++r) {
    for (const schedules::GapInterval& gap : split[r].gaps) {
      if (gap.cause != schedules::GapCause::kOverhead) continue;
      if (const auto at = started[r].find(gap.end_ns); at != started[r].end()) {
        base->overhead_ns[r][at->second] +=
            gap.end_ns - gap.start_ns - held.In(static_cast<int>(r), gap.start_ns, gap.end_ns);
      }
    }
  }
}

// Each transfer from both ends posted to the receiver seeing its data: the SEND and the RECV of
// one edge, paired by it (EdgeKey, as the engine keys them), less another rank's turns where
// the transfer waits for them (`held`: of the shared devices whose copies hold their compute,
// CopiesHoldCompute). Where a copy engine moves the data beside the compute (a GPU) the run's
// transfer time is its own, whole: measured on one H200 on 2026-11-30, two ranks' runs replayed
// with the other rank's kernels left out of every transfer came out 3-17% fast on every
// schedule, whole within 0.5% (docs/accuracy.md, "Ranks that share a core").
void ReplayTransfers(const schedules::Schedule& schedule, const schedules::RunRecord& record,
                     const HeldByOthers& held, sim::CostTable* base) {
  const schedules::UnitIndex units(schedule);
  std::vector<std::pair<int, int>> send_of(schedules::EdgeKeyCount(units), {-1, -1});  // (rank, index)
  for (int r = 0; r < schedule.ranks(); ++r) {
    for (int i = 0; i < static_cast<int>(schedule.ops[r].size()); ++i) {
      const schedules::Op& op = schedule.ops[r][i];
      if (!schedules::IsSend(op.kind)) continue;
      if (const std::optional<schedules::Edge> edge = schedules::CommEdge(schedule.shape, op)) {
        send_of[schedules::EdgeKey(units, *edge)] = {r, i};
      }
    }
  }
  base->transfer_ns.assign(schedule.ops.size(), {});
  for (size_t r = 0; r < schedule.ops.size(); ++r) base->transfer_ns[r].assign(schedule.ops[r].size(), -1);
  for (int r = 0; r < schedule.ranks(); ++r) {
    for (int i = 0; i < static_cast<int>(schedule.ops[r].size()); ++i) {
      const schedules::Op& op = schedule.ops[r][i];
      if (!schedules::IsRecv(op.kind)) continue;
      const std::optional<schedules::Edge> edge = schedules::CommEdge(schedule.shape, op);
      if (!edge) continue;
      const auto [sr, si] = send_of[schedules::EdgeKey(units, *edge)];
      const schedules::OpTiming& recv = record.ranks[r].ops[i];
      if (sr < 0 || recv.start_ns < 0 || record.ranks[sr].ops[si].start_ns < 0) continue;  // an end not traced
      const int64_t start = std::max(record.ranks[sr].ops[si].start_ns, recv.start_ns);
      base->transfer_ns[sr][si] = std::max<int64_t>(0, recv.end_ns - start - held.In(r, start, recv.end_ns));
    }
  }
}

}  // namespace

sim::CostTable ReplayCosts(const schedules::Schedule& schedule, sim::CostTable base,
                           const schedules::ScheduleMetrics& measured, const std::string& trace_path,
                           const schedules::RunRecord* record, const RunVariation& variation,
                           const sim::CostTable* ran_model, const std::vector<int>& ran_devices,
                           const std::vector<int>& transfer_devices) {
  const int stages = schedule.stages();
  if (static_cast<int>(measured.stage_costs.size()) != stages) {
    throw InputError(fmt::format("{}: the run has {} stages, {} has {}: replay predicts schedules of the measured run's "
                                 "stages (pipeline.ranks x pipeline.chunks)",
                                 trace_path, measured.stage_costs.size(), schedule.name, stages));
  }
  base.source = "replay:" + trace_path;
  ReplayStageCosts(measured, trace_path, ran_model, &base);
  base.op_overhead_ns = measured.executor ? std::llround(measured.executor->overhead_ns_per_op) : 0;
  base.rank_op_overhead_ns.clear();
  // Each rank's own: the runtime's work differs by rank (the one with the loss, the one that
  // receives more), and the run says how much each had.
  if (measured.executor && static_cast<int>(measured.ranks_detail.size()) == schedule.ranks()) {
    for (int r = 0; r < schedule.ranks(); ++r) {
      const size_t ops = schedule.ops[r].size();
      base.rank_op_overhead_ns.push_back(
          ops > 0 ? std::llround(measured.ranks_detail[r].overhead_ms * 1e6 / static_cast<double>(ops)) : 0);
    }
  }
  base.op_time_cv = 0;
  base.op_ns.clear();
  // The run's medians carry the stash of the schedule that ran (sim/stash.h); the model's
  // change of it between schedules is left out, as it is for every op of a same-run replay.
  base.rank_stash.clear();
  if (record == nullptr) {
    // Another schedule: every transfer as long as the run's median waited transfer (the fit's
    // link model would not know the receiver's copy), every op drawn with the run's spread.
    if (variation.transfer_bytes_per_s > 0) {
      // All of it the receiver's copy, just before the consuming op: the executor's receiver
      // copies on its own thread (in a wait, or in the poll after an op), so a transfer that
      // arrives during compute still costs the receiver that time.
      base.p2p = sim::P2pFit{0, variation.transfer_bytes_per_s, 0};
      base.transfer_ns.clear();
    }
    base.op_time_cv = variation.op_time_cv;
    return base;
  }
  const HeldByOthers held(schedule, *record, ran_devices);
  ReplayOpTimes(schedule, *record, ran_devices, held, &base);
  ReplayTransfers(schedule, *record, HeldByOthers(schedule, *record, transfer_devices), &base);
  base.p2p.reset();  // the measured transfers replace the fit, and the receiver's copy is in them
  return base;
}

std::vector<schedules::StageCostMetrics> RestageCosts(const std::vector<schedules::StageCostMetrics>& run,
                                                      const std::vector<int>& run_layers,
                                                      const std::vector<int>& layers) {
  int total = 0, run_total = 0;
  for (int n : layers) total += n;
  for (int n : run_layers) run_total += n;
  if (run.size() != run_layers.size() || total != run_total) {
    throw InputError(fmt::format("the run's {} stages hold {} layers, the schedule's {} stages {}: replay moves "
                                 "per-layer times between splits of the same layers",
                                 run.size(), run_total, layers.size(), total));
  }
  // Each layer's share of its run stage's passes, in model order.
  std::vector<schedules::StageCostMetrics> per_layer;
  for (size_t j = 0; j < run.size(); ++j) {
    schedules::StageCostMetrics share;
    for (const schedules::StageCostField& field : schedules::kStageCostFields) {
      share.*field.field = run[j].*field.field / run_layers[j];
    }
    per_layer.insert(per_layer.end(), static_cast<size_t>(run_layers[j]), share);
  }
  std::vector<schedules::StageCostMetrics> out(layers.size());
  size_t next = 0;
  for (size_t s = 0; s < layers.size(); ++s) {
    for (int k = 0; k < layers[s]; ++k, ++next) {
      for (const schedules::StageCostField& field : schedules::kStageCostFields) {
        out[s].*field.field += per_layer[next].*field.field;
      }
    }
  }
  return out;
}

namespace {

// The scenario as the run ran it: its scenario_file with `overrides` (those stored in the run
// file, then the trace's schedule). An error in one of them names the run file, not a --set
// the user never gave.
sim::Scenario LoadAsRan(const schedules::MetricsFile& run, const std::string& run_path,
                        const std::vector<std::string>& overrides) {
  try {
    return sim::LoadScenario(*run.scenario_file, overrides);
  } catch (const InputError& e) {
    constexpr std::string_view kSet = "--set ";
    std::string_view what = e.what();
    if (what.substr(0, kSet.size()) != kSet) throw;
    what.remove_prefix(kSet.size());
    throw InputError(fmt::format("{}: overrides (stored in the run file, as execute ran {}): {}", run_path,
                                 *run.scenario_file, what));
  }
}

}  // namespace

Replay ReplayRun(const schedules::MetricsFile& run, const std::string& run_path, const schedules::Trace& trace,
                 const std::string& trace_path, const std::vector<std::string>& sets, int64_t max_ops) {
  if (run.source != "measured") {
    throw InputError(
        fmt::format("{}: source is '{}': replay needs a measured run (execute --json)", run_path, run.source));
  }
  if (!run.scenario_file) {
    throw InputError(fmt::format("{}: the run does not say which scenario it ran (no scenario_file: written before "
                                 "replay existed); execute it again",
                                 run_path));
  }
  if (trace.source != "measured") {
    throw InputError(fmt::format("{}: source is '{}': replay needs a measured trace (execute --trace)", trace_path,
                                 trace.source));
  }
  Replay replay;
  replay.measured = run.Find(trace.schedule);
  if (replay.measured == nullptr) {
    throw InputError(fmt::format("{}: the trace is of schedule '{}', which {} did not run", trace_path,
                                 Printable(trace.schedule), run_path));
  }
  std::vector<std::string> all = run.overrides;
  all.push_back("pipeline.schedule=" + trace.schedule);
  const sim::Scenario ran = LoadAsRan(run, run_path, all);  // for its layer split
  all.insert(all.end(), sets.begin(), sets.end());
  replay.scenario = sim::LoadScenario(*run.scenario_file, all);
  const sim::Scenario& sc = replay.scenario;
  const std::vector<std::string> names = ScenarioScheduleNames(sc, true);
  CheckScheduleSizes(sc.pipeline, names, max_ops);
  const sim::Topology topo(sc.topology);
  // The run's schedule as it ran, its trace as its record, and what it shows beyond its medians.
  const schedules::Schedule ran_schedule = ScenarioSchedules(ran, {trace.schedule}).at(0);
  const schedules::RunRecord record = RecordOf(ran_schedule, trace, trace_path);
  // Ranks that shared a device: their passes' medians and spread as each op's own device time
  // (WithoutSharing), since the simulator time-slices the replay's shared devices itself.
  const std::vector<int> ran_devices = ran.pipeline.ranks_per_device > 1 ? ran.pipeline.RankDevices() : std::vector<int>{};
  const schedules::RunRecord own = WithoutSharing(ran_schedule, record, ran_devices);
  schedules::ScheduleMetrics own_metrics;
  if (!ran_devices.empty()) {
    own_metrics = *replay.measured;
    own_metrics.stage_costs = schedules::MeasuredStageCosts(ran_schedule, own);
  }
  const schedules::ScheduleMetrics& m = ran_devices.empty() ? *replay.measured : own_metrics;
  const RunVariation variation =
      VariationOf(ran_schedule, m, own,
                  ReplayCosts(ran_schedule, sim::BuildCosts(ran, ran_schedule), m, trace_path, nullptr, {}),
                  ran_devices);
  // The model's costs of the schedule that ran, in the what-if's scenario (what the model says
  // changes between it and each what-if of the same stages): built once, when first needed.
  std::optional<sim::CostTable> ran_model;
  for (schedules::Schedule& s : ScenarioSchedules(sc, names)) {
    const bool same_run = s.name == trace.schedule && s.microbatches == m.microbatches && s.steps == m.steps &&
                          s.ranks() == m.ranks && s.shape.chunks == m.chunks &&
                          s.ops == ran_schedule.ops;  // `auto` searched anew may reorder
    schedules::ScheduleMetrics run = m;
    if (static_cast<int>(m.stage_costs.size()) != s.stages()) {
      // Another number of stages (chunks or ranks): the run's times per layer, split anew.
      run.stage_costs = RestageCosts(m.stage_costs, sim::StageLayers(ran, ran_schedule.shape),
                                     sim::StageLayers(sc, s.shape));
    }
    const bool scale = !same_run && ran_schedule.stages() == s.stages();
    if (scale && !ran_model) ran_model = sim::BuildCosts(sc, ran_schedule);
    sim::CostTable costs = ReplayCosts(s, sim::BuildCosts(sc, s), run, trace_path, same_run ? &record : nullptr,
                                       variation, scale ? &*ran_model : nullptr, ran_devices,
                                       CopiesHoldCompute(ran) ? ran_devices : std::vector<int>{});
    replay.predictions.push_back(Predict(sc, topo, std::move(s), std::move(costs)));
  }
  return replay;
}

}  // namespace stagecraft::harness
