// `stagecraft execute`: run a scenario's schedules for real, one MPI process per pipeline rank
// of each of pipeline.data_parallel replicas (cpu backend: OpenBLAS + MPI), print a line per
// step and the measured table on rank 0, and write the measured metrics JSON and traces
// (DESIGN.md §5, §6, §9).
//
// Errors: bad input is found identically by every rank before any work, so rank 0 prints it
// and every rank exits 1. A failure during the run (an exception on one rank, a diverged
// loss) is printed once by that rank, which then aborts the whole job: no rank hangs.
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "commands.h"
#include "command_support.h"
#include "stagecraft/base/format.h"
#include "stagecraft/base/error.h"
#include "stagecraft/base/output_file.h"
#include "stagecraft/base/printable.h"
#include "stagecraft/exec/mpi_transport.h"
#include "stagecraft/exec/runtime.h"
#include "stagecraft/exec/step_graphs.h"
#include "stagecraft/harness/execution.h"
#include "stagecraft/harness/loss_plot.h"
#include "stagecraft/harness/measure.h"
#include "stagecraft/harness/progress.h"
#include "stagecraft/schedules/metrics_json.h"
#include "stagecraft/schedules/trace.h"
#include "stagecraft/sim/costs.h"
#include "stagecraft/sim/scenario_checks.h"
#include "stagecraft/scenario/units.h"

namespace stagecraft::cli {
namespace {

using namespace stagecraft::schedules;
using namespace stagecraft::exec;

struct ExecuteFlags {
  std::string scenario;
  std::vector<std::string> sets;
  std::string json_path;
  std::string trace_path;
  std::string plot_path;     // --plot: loss against wall time, a PNG
  std::string inject_fault;  // "RANK:STEP[:throw|hang|nan|oom]"
  bool fault_given = false;  // --inject-fault was given (an empty value is an error)
  std::string timeout = "300s";
  std::string backend = "cpu";
  std::string graphs = "off";  // --graphs on|off
  int64_t max_ops = 0;
};

// The fault of `--inject-fault`, which must name a rank of the job and a step of the run.
RunHooks ParseFault(const std::string& text, bool given, int ranks, int steps) {
  RunHooks hooks;
  if (!given) return hooks;
  const auto bad = [&] {
    return InputError(fmt::format("--inject-fault '{}': expected RANK:STEP[:throw|hang|nan|oom], e.g. 1:2:hang", text));
  };
  int consumed = 0;
  if (std::sscanf(text.c_str(), "%d:%d%n", &hooks.fault_rank, &hooks.fault_step, &consumed) != 2 ||
      hooks.fault_rank < 0 || hooks.fault_step < 0) {
    throw bad();
  }
  const std::string kind = text.substr(static_cast<size_t>(consumed));
  if (kind.empty() || kind == ":throw") {
    hooks.fault = RunHooks::Fault::kThrow;
  } else if (kind == ":hang") {
    hooks.fault = RunHooks::Fault::kHang;
  } else if (kind == ":nan") {
    hooks.fault = RunHooks::Fault::kNan;
  } else if (kind == ":oom") {
    hooks.fault = RunHooks::Fault::kOom;
  } else {
    throw bad();
  }
  if (hooks.fault_rank >= ranks) {
    throw InputError(fmt::format("--inject-fault {}: rank {} is not in the job (ranks 0..{})", text, hooks.fault_rank,
                                 ranks - 1));
  }
  if (hooks.fault_step >= steps) {
    throw InputError(fmt::format("--inject-fault {}: step {} is past the run (steps 0..{}, pipeline.steps {})", text,
                                 hooks.fault_step, steps - 1, steps));
  }
  return hooks;
}

constexpr int64_t kMinTimeoutNs = 1000;

std::chrono::nanoseconds ParseTimeout(const std::string& text) {
  int64_t ns = 0;
  try {
    ns = sim::ParseDurationNs(text);
  } catch (const InputError& e) {
    throw InputError(fmt::format("--timeout: {}", e.what()));
  }
  // A wait shorter than a microsecond could not even see a local transfer complete.
  if (ns < kMinTimeoutNs) throw InputError(fmt::format("--timeout {}: must be at least 1us", text));
  return std::chrono::nanoseconds(ns);
}

// Prints "<schedule> step 3/20 ..." to `to` as the last stage finishes each step (every step for
// short runs, about once a second for long ones, and always the last).
RunHooks::StepFn ProgressPrinter(const std::string& schedule, const TrainingConfig& config, int microbatches,
                                 std::FILE* to) {
  auto last_end = std::make_shared<int64_t>(0);
  auto last_print = std::make_shared<int64_t>(-1);
  return [=](const StepProgress& p) {
    const int64_t step_ns = p.end_ns - *last_end;
    *last_end = p.end_ns;
    if (!harness::DueForReport(p, *last_print)) return;
    *last_print = p.end_ns;
    const double samples = static_cast<double>(microbatches) * config.microbatch_size * config.data_parallel;
    std::fprintf(to, "%-11s step %*d/%d (%3d%%)  loss %.6f  step time %9.3f ms  %10.1f samples/s\n",
                 schedule.c_str(), static_cast<int>(std::to_string(p.steps).size()), p.step + 1, p.steps,
                 100 * (p.step + 1) / p.steps, p.loss, step_ns * 1e-6, step_ns > 0 ? samples / (step_ns * 1e-9) : 0.0);
    std::fflush(to);
  };
}

// The measured table rank 0 prints at the end.
std::string MeasuredTable(const std::vector<harness::MeasuredSchedule>& measured) {
  std::string out = fmt::format("{:<12} {:>13} {:>20} {:>8} {:>16} {:>12} {:>13}  {}\n", "schedule", "step time",
                                "throughput", "bubble", "peak memory", "wait (max)", "overhead/op", "loss first -> last");
  for (const harness::MeasuredSchedule& m : measured) {
    const schedules::ScheduleMetrics& x = m.metrics;
    const schedules::ExecutorMetrics& e = *x.executor;
    const int worst = x.WorstMemoryRank();
    double wait = 0;  // blocked on a receive, wait and transfer
    for (const auto& r : x.ranks_detail) wait = std::max(wait, r.wait_ms + r.transfer_ms);
    out += fmt::format("{:<12} {:>10.3f} ms {:>10.1f} samples/s {:>7.2f}% {:>16} {:>9.1f} ms {:>10.1f} us  {:.6f} -> {:.6f}\n",
                       Printable(x.schedule), x.step_time_ms, x.throughput_samples_per_s, 100 * x.bubble_fraction,
                       FormatBytes(x.ranks_detail[worst].peak_memory_bytes), wait, e.overhead_ns_per_op * 1e-3,
                       e.losses.empty() ? 0.0 : e.losses.front(), e.losses.empty() ? 0.0 : e.losses.back());
  }
  // training.target_loss: when each schedule's loss got there, beside its throughput.
  if (!measured.empty() && measured.front().metrics.executor->target_loss) {
    const schedules::ExecutorMetrics& first = *measured.front().metrics.executor;
    out += fmt::format("\ntime to loss {:.6g} (mean of {} step{}):\n", *first.target_loss, first.loss_window,
                       first.loss_window == 1 ? "" : "s");
    for (const harness::MeasuredSchedule& m : measured) {
      const schedules::ExecutorMetrics& e = *m.metrics.executor;
      out += fmt::format("  {:<12} {} ({:.1f} samples/s)\n", Printable(m.metrics.schedule), TargetText(e),
                         m.metrics.throughput_samples_per_s);
    }
  }
  return out;
}


// Everything every rank needs before any work; all input checks happen here.
struct Plan {
  harness::ExecutionPlan run;
  RunHooks hooks;
  std::chrono::nanoseconds deadline{exec::kDefaultWaitDeadline};
  int json = -1;              // rank 0: --json's handle in the outputs
  std::vector<int> traces;    // rank 0: --trace's handles, per schedule
  int plot = -1;              // rank 0: --plot's handle
  std::string partial_path;   // OUT.partial ("": none)
  std::FILE* report = stdout;  // the lines a person reads: stderr when an output is stdout
};

// The output paths, checked before any work: rank 0 writes --json and --trace; OUT.partial
// beside OUT (when OUT is a regular file: a stream has no "beside") is written by the rank of
// the last stage during a schedule and by rank 0 after each.
void CheckOutputs(const ExecuteFlags& f, int rank, Plan* plan, OutputSet* outputs) {
  if (rank == 0 && !f.json_path.empty()) plan->json = outputs->Add(f.json_path, "--json");
  if (rank == 0) plan->traces = AddTraceOutputs(*outputs, f.trace_path, plan->run.names);
  if (rank == 0 && !f.plot_path.empty()) plan->plot = outputs->Add(f.plot_path, "--plot");
  if (f.json_path.empty()) return;
  const OutputTarget out = CheckOutputPath(f.json_path, "--json");
  if (out.kind != OutputTarget::Kind::kFile) return;
  const OutputTarget partial = CheckOutputPath(out.resolved + ".partial", "--json");
  if (partial.kind != OutputTarget::Kind::kFile) {
    throw InputError(fmt::format("{}: not a regular file; execute keeps its progress there (OUT.partial)", partial.path));
  }
  plan->partial_path = partial.resolved;
}

// With --graphs on, one line per schedule on rank 0: whether its steps are captured and
// replayed, or why they are issued call by call (exec/step_graphs.h; rank 0's plan, by the
// conditions the runtime plans by: a pipeline's ranks capture alike over a transport that records
// its transfers, nccl).
void SayStepGraphs(const Plan& plan, exec::ProcessRuntime& runtime) {
  const harness::ExecutionPlan& run = plan.run;
  const exec::StepGraphConditions conditions = exec::StepGraphConditionsOf(
      run.config, *runtime.device, *runtime.transport, plan.hooks, runtime.replicas.get());
  for (const Schedule& s : run.schedules) {
    const exec::StepGraphPlan graphs = exec::PlanStepGraphs(s, 0, conditions);
    if (graphs.enabled) {
      std::fprintf(stderr, "execute: %s: step graphs: step %d captured (%d segment%s), steps %d-%d replayed\n",
                   s.name.c_str(), graphs.capture_step, graphs.segments, graphs.segments == 1 ? "" : "s",
                   graphs.capture_step + 1, s.steps - 1);
    } else {
      std::fprintf(stderr, "execute: %s: step graphs off: %s\n", s.name.c_str(), graphs.why_not.c_str());
    }
  }
}

// No collective call may happen here: a rank that fails leaves at any point, and the others
// must meet it in AnyRankFailed. `local_ranks`: the job's ranks on this node.
void MakePlan(const ExecuteFlags& f, int world, int rank, int local_ranks, Plan* plan, OutputSet* outputs) {
  plan->report = f.json_path == "-" || f.trace_path == "-" ? stderr : stdout;
  sim::Scenario sc = sim::LoadScenario(f.scenario, f.sets);
  RefuseWorkload(sc, "execute");
  sim::CheckPipeMareRuns(sc);
  plan->deadline = ParseTimeout(f.timeout);
  // RANK names a process of the job: with replicas, pipeline rank RANK % P of replica RANK / P.
  const int processes = sc.pipeline.ranks * std::max(sc.pipeline.data_parallel, 1);
  plan->hooks = ParseFault(f.inject_fault, f.fault_given, processes, sc.pipeline.steps);
  const exec::Backend backend = BackendFor(f.backend, sc);
  plan->run = harness::PlanExecution(std::move(sc), backend, world, rank, local_ranks, f.max_ops);
  if (plan->hooks.fault_rank >= 0) {
    const exec::WorldLayout& layout = plan->run.layout;
    plan->hooks.fault_rank = layout.ReplicaOf(plan->hooks.fault_rank) == plan->run.replica
                                 ? layout.PipelineRankOf(plan->hooks.fault_rank)
                                 : -1;
  }
  plan->hooks.step_graphs = f.graphs == "on";
  CheckOutputs(f, rank, plan, outputs);
}

int Run(const ExecuteFlags& f) {
  MpiSession session(nullptr, nullptr);
  const int rank = MpiWorldRank();
  Plan plan;
  OutputSet outputs;
  std::string error;
  const int local_ranks = exec::MpiLocalSize();
  try {
    MakePlan(f, MpiWorldSize(), rank, local_ranks, &plan, &outputs);
  } catch (const std::exception& e) {  // InputError, and anything else the plan met (bad_alloc)
    error = e.what();
  }
  if (AnyRankFailed(error)) return 1;
  const sim::Scenario& sc = plan.run.scenario;
  const int replicas = plan.run.layout.replicas;
  exec::ProcessRuntime runtime = StartRuntime(plan.run.backend, sc, plan.deadline, replicas);
  Device& device = *runtime.device;
  if (rank == 0) {
    const std::string data = replicas > 1 ? fmt::format(" x {} replicas ({})", replicas, runtime.replicas->Name()) : "";
    std::fprintf(plan.report, "scenario %s: %d ranks%s (%s/%s), %d microbatches x %d samples, %d step(s), %s lr %g\n",
                 Printable(sc.name).c_str(), sc.pipeline.ranks, data.c_str(), device.Name().c_str(),
                 runtime.transport->Name().c_str(), sc.pipeline.microbatches, sc.pipeline.microbatch_size * replicas,
                 sc.pipeline.steps, plan.run.config.optimizer.c_str(), plan.run.config.lr);
    std::fflush(plan.report);
    if (plan.hooks.step_graphs) SayStepGraphs(plan, runtime);
  }
  // Replica 0 reports (its pipeline's rank 0 is the job's): the other replicas keep no progress
  // file and print no step lines.
  const bool reports = plan.run.replica == 0;
  harness::ProgressFile progress(reports ? plan.partial_path : std::string(),
                                 harness::MeasuredFile(sc, device.Name(), {}),
                                 static_cast<int>(plan.run.schedules.size()));
  harness::RunReporting reporting;
  reporting.progress = &progress;
  reporting.share_done = reports && !f.json_path.empty();
  if (reports) {
    reporting.step_printer = [&plan](const Schedule& s, const TrainingConfig& config) {
      return ProgressPrinter(s.name, config, s.microbatches, plan.report);
    };
  }
  std::vector<harness::MeasuredSchedule> measured;
  try {
    measured = harness::RunSchedules(plan.run, plan.hooks, device, *runtime.transport, reporting,
                                     runtime.replicas.get());
  } catch (const std::exception& e) {
    std::fprintf(stderr, "stagecraft: error: rank %d (%s): %s\n", rank, HostName().c_str(), Printable(e.what()).c_str());
    runtime.transport->Abort(1);
  }
  if (rank != 0) return 0;
  // Everything is computed before anything is written: an error leaves no partial output.
  if (plan.json >= 0) outputs.Set(plan.json, MetricsFileToJson(harness::MeasuredFile(sc, device.Name(), measured)));
  for (size_t k = 0; k < plan.traces.size(); ++k) outputs.Set(plan.traces[k], TraceToJson(measured[k].trace));
  try {
    if (plan.plot >= 0) {
      std::vector<schedules::ScheduleMetrics> runs;
      for (const harness::MeasuredSchedule& m : measured) runs.push_back(m.metrics);
      outputs.Set(plan.plot, harness::LossPng(runs));
    }
    outputs.Commit();
  } catch (const InputError& e) {
    // OUT.partial holds every schedule's metrics: nothing measured is lost.
    std::fprintf(stderr, "stagecraft: error: %s%s\n", Printable(e.what()).c_str(),
                 plan.partial_path.empty() ? "" : fmt::format(" (the measurements are in {})", plan.partial_path).c_str());
    return 1;
  }
  if (!plan.partial_path.empty()) {
    std::error_code ignored;
    std::filesystem::remove(plan.partial_path, ignored);  // the run is complete: OUT says it all
  }
  const std::string table = MeasuredTable(measured);
  std::fwrite(table.data(), 1, table.size(), plan.report);
  return 0;
}

}  // namespace

Command AddExecuteCommand(CLI::App& root) {
  auto flags = std::make_shared<ExecuteFlags>();
  CLI::App* app = root.add_subcommand("execute", "Run a scenario's schedules for real under mpirun and measure them");
  AddScenarioOptions(app, &flags->scenario, &flags->sets, "Scenario YAML (with model.mlp and training)");
  app->add_option("--json", flags->json_path,
                  "Write the measured metrics of every schedule (plus losses) as JSON (- for standard output); a "
                  "file OUT keeps OUT.partial while the run lasts");
  app->add_option("--trace", flags->trace_path,
                  "Write the measured trace (one file per schedule when several; - for standard output)");
  app->add_option("--plot", flags->plot_path,
                  "Draw every schedule's training loss against wall time as a PNG (training.target_loss as a line)");
  app->add_option("--timeout", flags->timeout,
                  "How long any wait (a transfer, a barrier, the gather) may take before the run is called hung and "
                  "every rank exits non-zero, e.g. 30s")
      ->default_val("300s");
  CLI::Option* fault = app->add_option("--inject-fault", flags->inject_fault,
                  "Testing failure handling: RANK:STEP[:throw|hang|nan|oom] makes that rank throw (default), hang, "
                  "poison a weight with NaN, or fail an allocation at that step");
  app->add_option("--graphs", flags->graphs,
                  "on: capture a step of each schedule's compute once and replay it every later step (CUDA "
                  "Graphs; a one-rank flush schedule on the cuda backend, each refusal said in one line); off: "
                  "issue every call as it comes")
      ->check(CLI::IsMember({"on", "off"}))
      ->default_val("off");
  AddBackendOption(app, &flags->backend);
  AddMaxOpsOption(app, &flags->max_ops);
  return {app, [flags, fault] {
            flags->fault_given = fault->count() > 0;
            return Run(*flags);
          }};
}

}  // namespace stagecraft::cli
