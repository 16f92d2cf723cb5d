// A multi-model workload (workload.h): each task simulated alone, cut into units, placed by
// sim/workload.h.
#include "stagecraft/harness/workload.h"

#include <fmt/format.h>

#include <algorithm>
#include <stdexcept>
#include <utility>

#include "stagecraft/base/error.h"
#include "stagecraft/base/format.h"
#include "stagecraft/base/printable.h"
#include "stagecraft/schedules/op_kinds.h"
#include "stagecraft/sim/copy_streams.h"

namespace stagecraft::harness {
namespace {

using schedules::Op;
using schedules::OpKind;

// The steps its run simulates: one, or two when it trains more (the second is the steady step).
int SimulatedSteps(int steps) { return std::min(steps, 2); }

// One simulated step of a run: the end of its last compute op over all ranks, and each rank's
// compute time in it.
struct StepTimes {
  int64_t end_ns = 0;
  int64_t busy_ns = 0;  // summed over ranks
};
std::vector<StepTimes> Steps(const Prediction& p) {
  std::vector<StepTimes> steps(static_cast<size_t>(std::max(1, p.schedule.steps)));
  for (size_t r = 0; r < p.schedule.ops.size(); ++r) {
    const std::vector<Op>& ops = p.schedule.ops[r];
    for (size_t i = 0; i < ops.size(); ++i) {
      if (!schedules::IsCompute(ops[i].kind)) continue;
      const schedules::OpTiming& t = p.result.ranks[r].ops[i];
      StepTimes& s = steps[static_cast<size_t>(ops[i].step)];
      s.end_ns = std::max(s.end_ns, t.end_ns);
      s.busy_ns += t.end_ns - t.start_ns;
    }
  }
  return steps;
}

// A whole run of `steps` steps from one or two simulated ones: the first as simulated, each later
// one as the second.
sim::WorkUnit WholeRun(const Prediction& p, int steps, int devices) {
  const std::vector<StepTimes> s = Steps(p);
  int64_t span = s[0].end_ns - p.result.start_ns;
  int64_t busy = s[0].busy_ns;
  if (steps > 1 && s.size() > 1) {
    span += (steps - 1) * (s[1].end_ns - s[0].end_ns);
    busy += (steps - 1) * s[1].busy_ns;
  }
  span += p.result.end_ns - s.back().end_ns;  // what follows the last compute op (its copies back)
  busy = std::min(span, busy / devices);
  return sim::WorkUnit{span, span, busy, 0, true};
}

// A moving task's units of simulated step `step` (workload.h), from `from_ns`, the end of the one
// before.
std::vector<sim::WorkUnit> ShardTurns(const Prediction& p, const sim::Topology& topology, int step, int64_t* from_ns) {
  const std::vector<Op>& ops = p.schedule.ops[0];
  const std::vector<schedules::OpTiming>& times = p.result.ranks[0].ops;
  std::vector<sim::WorkUnit> units;
  std::vector<int64_t> cold_extra;  // per unit: its shard's state brought in, less the wait it replaces
  for (size_t i = 0; i < ops.size(); ++i) {
    const Op& op = ops[i];
    if (!schedules::IsCompute(op.kind) || op.step != step) continue;
    const bool backward = op.kind != OpKind::kF;
    if (units.empty() || units.back().shard != op.stage || units.back().backward != backward) {
      const bool resident = !units.empty() && units.back().shard == op.stage;
      // Its shard's weights (with their gradients) and optimizer state, alone over the host link
      // of the task's one device (device 0).
      const sim::StageCost& cost = p.costs.stages[static_cast<size_t>(op.stage)];
      const double state_ns =
          sim::CopyAloneNs(topology, 0,
                           sim::CopyBytes(cost, schedules::Tensor::kWeights) +
                               sim::CopyBytes(cost, schedules::Tensor::kOptimizer));
      cold_extra.push_back(static_cast<int64_t>(state_ns * (resident ? 2 : 1)) - (times[i].start_ns - *from_ns));
      units.push_back(sim::WorkUnit{0, 0, 0, op.stage, backward});
    }
    sim::WorkUnit& u = units.back();
    u.busy_ns += times[i].end_ns - times[i].start_ns;
    u.warm_ns += times[i].end_ns - *from_ns;
    *from_ns = times[i].end_ns;
  }
  for (size_t u = 0; u < units.size(); ++u) units[u].cold_ns = units[u].warm_ns + std::max<int64_t>(0, cold_extra[u]);
  return units;
}

// Whether the task's state lives on the host, so that its shards may run on any device.
bool Moves(const sim::Scenario& task) {
  const bool spilled = task.pipeline.schedules.front() == "spilled" ||
                       task.pipeline.offload.weights == sim::WeightsOffload::kSpill;
  return spilled && task.pipeline.devices() == 1;
}

}  // namespace

sim::WorkloadTask WorkOf(const std::string& name, const Prediction& p, const sim::Topology& topology,
                         const sim::PipelineSpec& pipeline, int steps, bool moves) {
  sim::WorkloadTask task;
  task.name = name;
  task.moves = moves;
  if (!moves) {
    task.devices = static_cast<int>(pipeline.devices());
    // The simulated ranks are replica 0's tensor rank 0; every device of the job is as busy as
    // the rank it runs, and ranks that share a device add up.
    task.units.push_back(WholeRun(p, steps, pipeline.pipeline_devices()));
    return task;
  }
  int64_t from = p.result.start_ns;
  const std::vector<sim::WorkUnit> first = ShardTurns(p, topology, 0, &from);
  task.units = first;
  if (steps > 1 && p.schedule.steps > 1) {
    const std::vector<sim::WorkUnit> steady = ShardTurns(p, topology, 1, &from);
    for (int s = 1; s < steps; ++s) task.units.insert(task.units.end(), steady.begin(), steady.end());
  }
  // What follows the run's last compute op (its shards' state sent back) ends its last unit.
  const int64_t tail = std::max<int64_t>(0, p.result.end_ns - from);
  task.units.back().warm_ns += tail;
  task.units.back().cold_ns += tail;
  return task;
}

WorkloadPrediction PredictWorkload(const sim::Scenario& sc, const sim::Topology& topology) {
  WorkloadPrediction w;
  w.devices = sc.topology.devices();
  int64_t units = 0;
  int64_t host = 0;
  for (size_t i = 0; i < sc.tasks.size(); ++i) {
    TaskRun run;
    run.name = sc.tasks[i].name;
    run.steps = sc.tasks[i].pipeline.steps;
    run.scenario = sim::TaskScenario(sc, i);
    run.scenario.pipeline.steps = SimulatedSteps(run.steps);
    run.moves = Moves(run.scenario);
    const std::vector<std::string> names = run.scenario.pipeline.schedules;
    run.prediction = Predict(run.scenario, topology, ScenarioSchedules(run.scenario, names).at(0));
    sim::WorkloadTask work = WorkOf(run.name, run.prediction, topology, run.scenario.pipeline, run.steps, run.moves);
    run.units_per_step = run.moves ? static_cast<int>(work.units.size()) / run.steps : 1;
    if (run.moves && (units += static_cast<int64_t>(work.units.size())) > kMaxWorkloadUnits) {
      throw InputError(fmt::format("{}: tasks.{}.steps: the moving tasks take {} or more shard turns in all, more than "
                                   "the {} a workload places one by one; simulate fewer steps",
                                   sc.path, i, units, kMaxWorkloadUnits));
    }
    // Every task's state stays in host memory for the whole workload (Hydra keeps each model's
    // shards there between their turns): the fullest node's, added up.
    for (int64_t peak : run.prediction.result.node_peak_host_memory_bytes) host += std::max<int64_t>(0, peak);
    w.work.push_back(std::move(work));
    w.tasks.push_back(std::move(run));
  }
  if (sc.topology.host.memory_bytes > 0 && host > sc.topology.host.memory_bytes) {
    throw InputError(fmt::format("{}: topology.host.memory: the tasks keep {} in host memory together, more than the "
                                 "{} stated; run fewer tasks or state more host memory",
                                 sc.path, FormatBytes(host), FormatBytes(sc.topology.host.memory_bytes)));
  }
  try {
    w.lrtf = sim::ScheduleWorkload(w.work, w.devices, sim::TaskScheduler::kLrtf);
    w.sequential = sim::ScheduleWorkload(w.work, w.devices, sim::TaskScheduler::kSequential);
  } catch (const std::invalid_argument& e) {
    throw InputError(fmt::format("{}: tasks: {}", sc.path, e.what()));
  }
  return w;
}

schedules::MetricsFile PredictedWorkloadFile(const sim::Scenario& sc, const WorkloadPrediction& w) {
  schedules::MetricsFile file;
  file.scenario = sc.name;
  file.source = "predicted";
  file.costs = w.tasks.empty() ? "" : w.tasks.front().prediction.cost_source;
  schedules::WorkloadMetrics& l = file.workload.emplace();
  const sim::WorkloadSchedule& chosen = w.Chosen(sc.pipeline.task_scheduler);
  l.scheduler = std::string(sim::Name(sc.pipeline.task_scheduler));
  l.makespan_ms = static_cast<double>(chosen.makespan_ns) * 1e-6;
  l.device_busy_fraction = chosen.device_busy_fraction;
  l.lrtf_makespan_ms = static_cast<double>(w.lrtf.makespan_ns) * 1e-6;
  l.sequential_makespan_ms = static_cast<double>(w.sequential.makespan_ns) * 1e-6;
  for (size_t i = 0; i < w.tasks.size(); ++i) {
    const TaskRun& run = w.tasks[i];
    schedules::ScheduleMetrics m = run.prediction.metrics;
    m.schedule = fmt::format("{}/{}", run.name, m.schedule);
    file.schedules.push_back(std::move(m));
    l.tasks.push_back({run.name, run.prediction.schedule.name, w.work[i].devices, run.steps, run.moves,
                       static_cast<double>(w.work[i].AloneNs()) * 1e-6, static_cast<double>(chosen.task_start_ns[i]) * 1e-6,
                       static_cast<double>(chosen.task_end_ns[i]) * 1e-6});
  }
  return file;
}

schedules::Trace WorkloadTrace(const sim::Scenario& sc, const WorkloadPrediction& w) {
  schedules::Trace trace;
  trace.source = "predicted";
  trace.costs = w.tasks.empty() ? "" : w.tasks.front().prediction.cost_source;
  trace.scenario = sc.name;
  trace.schedule = fmt::format("workload ({})", sim::Name(sc.pipeline.task_scheduler));
  for (const TaskRun& run : w.tasks) trace.tasks.push_back(run.name);
  const sim::WorkloadSchedule& chosen = w.Chosen(sc.pipeline.task_scheduler);
  for (const sim::UnitRun& r : chosen.runs) {
    const TaskRun& run = w.tasks[static_cast<size_t>(r.task)];
    const sim::WorkUnit& unit = w.work[static_cast<size_t>(r.task)].units[static_cast<size_t>(r.unit)];
    for (int d = r.device; d < r.device + r.devices; ++d) {
      schedules::TraceOp op;
      op.rank = d;
      op.op.kind = unit.backward ? OpKind::kB : OpKind::kF;
      op.op.stage = unit.shard;
      op.op.microbatch = r.task;
      op.op.step = run.moves ? r.unit / std::max(1, run.units_per_step) : 0;
      op.op_index = r.unit;
      op.start_ns = r.start_ns;
      op.duration_ns = r.end_ns - r.start_ns;
      trace.ops.push_back(op);
    }
  }
  return trace;
}

std::string WorkloadText(const sim::Scenario& sc, const WorkloadPrediction& w) {
  std::string out = fmt::format("scenario {}: {} tasks on {} devices; costs: {}\n", Printable(sc.name), w.tasks.size(),
                                w.devices, w.tasks.empty() ? "" : w.tasks.front().prediction.cost_source);
  out += fmt::format("{:<16} {:<12} {:>7} {:>6} {:>13} {:>13} {:>16}  {}\n", "task", "schedule", "devices", "steps",
                     "step time", "alone", "peak memory", "OOM");
  for (size_t i = 0; i < w.tasks.size(); ++i) {
    const TaskRun& run = w.tasks[i];
    const schedules::ScheduleMetrics& m = run.prediction.metrics;
    out += fmt::format("{:<16} {:<12} {:>7} {:>6} {:>10.3f} ms {:>10.3f} s {:>16}  {}\n", Printable(run.name),
                       Printable(m.schedule), run.moves ? std::string("any 1") : std::to_string(w.work[i].devices),
                       run.steps, m.step_time_ms, static_cast<double>(w.work[i].AloneNs()) * 1e-9,
                       FormatBytes(m.ranks_detail[m.WorstMemoryRank()].peak_memory_bytes), m.AnyOom() ? "OOM" : "no");
  }
  const auto line = [&](const sim::WorkloadSchedule& s, std::string_view what) {
    std::string busy;
    for (double f : s.device_busy_fraction) busy += fmt::format(" {:.0f}%", 100 * f);
    int cold = 0;
    for (const sim::UnitRun& r : s.runs) cold += r.cold ? 1 : 0;
    return fmt::format("{:<12} makespan {:>10.3f} s; devices busy:{}; {} shard turn(s) moved or preempted ({})\n",
                       sim::Name(s.scheduler), static_cast<double>(s.makespan_ns) * 1e-9, busy, cold, what);
  };
  out += line(w.lrtf, "each free device takes the waiting task with the longest remaining time");
  out += line(w.sequential, "the tasks one after another");
  const double gain = w.lrtf.makespan_ns > 0 ? static_cast<double>(w.sequential.makespan_ns) /
                                                   static_cast<double>(w.lrtf.makespan_ns)
                                             : 1.0;
  out += fmt::format("task scheduler {}: Sharded-LRTF finishes {:.2f}x sooner than one after another\n",
                     sim::Name(sc.pipeline.task_scheduler), gain);
  return out;
}

}  // namespace stagecraft::harness
