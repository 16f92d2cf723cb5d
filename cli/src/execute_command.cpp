// `stagecraft execute`: run a scenario's schedules for real, one MPI process per pipeline rank
// (cpu backend: OpenBLAS + MPI), print a line per step and the measured table on rank 0, and
// write the measured metrics JSON and traces (DESIGN.md §5, §6).
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
#include "measured.h"
#include "scenario_runs.h"
#include "stagecraft/base/error.h"
#include "stagecraft/base/output_file.h"
#include "stagecraft/base/printable.h"
#include "stagecraft/exec/mpi_transport.h"
#include "stagecraft/exec/runtime.h"
#include "stagecraft/exec/setup_rounds.h"
#include "stagecraft/schedules/metrics_json.h"
#include "stagecraft/schedules/trace.h"
#include "stagecraft/sim/costs.h"
#include "stagecraft/sim/scenario.h"
#include "stagecraft/sim/units.h"

namespace stagecraft::cli {
namespace {

using namespace stagecraft::schedules;
using namespace stagecraft::exec;

struct ExecuteFlags {
  std::string scenario;
  std::vector<std::string> sets;
  std::string json_path;
  std::string trace_path;
  std::string inject_fault;  // "RANK:STEP[:throw|hang|nan|oom]"
  bool fault_given = false;  // --inject-fault was given (an empty value is an error)
  std::string timeout = "300s";
  std::string backend = "cpu";
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

// The first and last steps of a run always, and otherwise about once a second since `last_ns`
// (< 0: never): when the progress file is rewritten.
bool DueOncePerSecond(const StepProgress& p, int64_t last_ns) {
  return p.step + 1 == p.steps || last_ns < 0 || p.end_ns - last_ns > 1'000'000'000;
}
// Whether a step's line is printed: every step of a short run, else as DueOncePerSecond.
bool DueForReport(const StepProgress& p, int64_t last_ns) { return p.steps <= 50 || DueOncePerSecond(p, last_ns); }

// Prints "<schedule> step 3/20 ..." to `to` as the last stage finishes each step (every step for
// short runs, about once a second for long ones, and always the last).
RunHooks::StepFn ProgressPrinter(const std::string& schedule, const TrainingConfig& config, int microbatches,
                                 std::FILE* to) {
  auto last_end = std::make_shared<int64_t>(0);
  auto last_print = std::make_shared<int64_t>(-1);
  return [=](const StepProgress& p) {
    const int64_t step_ns = p.end_ns - *last_end;
    *last_end = p.end_ns;
    if (!DueForReport(p, *last_print)) return;
    *last_print = p.end_ns;
    const double samples = static_cast<double>(microbatches) * config.microbatch_size;
    std::fprintf(to, "%-11s step %*d/%d (%3d%%)  loss %.6f  step time %9.3f ms  %10.1f samples/s\n",
                 schedule.c_str(), static_cast<int>(std::to_string(p.steps).size()), p.step + 1, p.steps,
                 100 * (p.step + 1) / p.steps, p.loss, step_ns * 1e-6, step_ns > 0 ? samples / (step_ns * 1e-9) : 0.0);
    std::fflush(to);
  };
}

// `execute --json OUT` keeps OUT.partial while it runs: the complete schedules so far (every
// rank holds them, broadcast from rank 0 after each) and the running schedule's finished steps,
// written by the rank that sees them finish (the last stage's) after a schedule's first step,
// then about once a second, and after its last. Every write replaces the file whole (a few
// hundred microseconds inside the timed run, on the rank of the last stage: once a step, that
// was a percent of a 20-step run's time). A complete run removes it once OUT is written; a
// killed or failed one leaves it, marked partial.
class ProgressFile {
 public:
  ProgressFile(std::string path, MetricsFile base, int schedules_total)
      : path_(std::move(path)), file_(std::move(base)) {
    file_.partial = PartialRun{};
    file_.partial->schedules_total = schedules_total;
  }
  bool enabled() const { return !path_.empty(); }
  const std::string& path() const { return path_; }

  // Every rank, once schedule `done - 1` is complete: the complete ones (metrics JSON).
  void SetDone(const std::string& done_json) {
    MetricsFile done = MetricsFileFromJson(done_json, "the progress broadcast");
    file_.schedules = std::move(done.schedules);
    PartialRun& p = *file_.partial;
    p.schedules_done = static_cast<int>(file_.schedules.size());
    p.schedule.clear();
    p.steps = 0;
    p.losses.clear();
    p.step_ms.clear();
  }
  void Start(const std::string& schedule, int steps) {
    file_.partial->schedule = schedule;
    file_.partial->steps = steps;
    last_write_ns_ = -1;
  }
  void Step(const StepProgress& progress, int64_t step_ns) {
    PartialRun& p = *file_.partial;
    p.losses.push_back(progress.loss);
    p.step_ms.push_back(static_cast<double>(step_ns) * 1e-6);
    if (!DueOncePerSecond(progress, last_write_ns_) || !std::isfinite(progress.loss)) return;  // a diverged step ends the run; its file keeps the last good one
    last_write_ns_ = progress.end_ns;
    Write();
  }
  void Write() const { WriteTextFileAtomically(path_, MetricsFileToJson(file_)); }

 private:
  std::string path_;
  MetricsFile file_;
  int64_t last_write_ns_ = -1;
};

// Everything every rank needs before any work; all input checks happen here.
struct Plan {
  sim::Scenario scenario;
  TrainingConfig config;
  std::vector<std::string> names;  // the schedules, in order
  std::vector<Schedule> schedules;
  std::vector<std::vector<int>> layers;  // per schedule, layers per stage (as the simulator splits them)
  std::vector<std::vector<int64_t>> predicted_peak_bytes;  // per schedule, per rank
  RunHooks hooks;
  std::chrono::nanoseconds deadline{exec::kDefaultWaitDeadline};
  exec::Backend backend = exec::Backend::kCpu;
  bool feeds = false, scores = false;  // this rank holds stage 0 / the last stage in some schedule
  int json = -1;                       // rank 0: --json's handle in the outputs
  std::vector<int> traces;             // rank 0: --trace's handles, per schedule
  std::string partial_path;            // OUT.partial ("": none)
  std::FILE* report = stdout;          // the lines a person reads: stderr when an output is stdout
};

// The output paths, checked before any work: rank 0 writes --json and --trace; OUT.partial
// beside OUT (when OUT is a regular file: a stream has no "beside") is written by the rank of
// the last stage during a schedule and by rank 0 after each.
void CheckOutputs(const ExecuteFlags& f, int rank, Plan* plan, OutputSet* outputs) {
  if (rank == 0 && !f.json_path.empty()) plan->json = outputs->Add(f.json_path, "--json");
  if (rank == 0) plan->traces = AddTraceOutputs(*outputs, f.trace_path, plan->names);
  if (f.json_path.empty()) return;
  const OutputTarget out = CheckOutputPath(f.json_path, "--json");
  if (out.kind != OutputTarget::Kind::kFile) return;
  const OutputTarget partial = CheckOutputPath(out.resolved + ".partial", "--json");
  if (partial.kind != OutputTarget::Kind::kFile) {
    throw InputError(fmt::format("{}: not a regular file; execute keeps its progress there (OUT.partial)", partial.path));
  }
  plan->partial_path = partial.resolved;
}

// With the cpu backend the ranks of this node share its memory: the simulator's predicted peak
// of each schedule, times the ranks here, must fit in it.
void RefuseMoreThanThisNodeHolds(const Plan& plan, int local_ranks) {
  if (plan.backend != exec::Backend::kCpu) return;
  const long pages = sysconf(_SC_PHYS_PAGES), page_bytes = sysconf(_SC_PAGE_SIZE);
  if (pages <= 0 || page_bytes <= 0) return;
  const int64_t node_bytes = static_cast<int64_t>(pages) * page_bytes;
  for (size_t k = 0; k < plan.schedules.size(); ++k) {
    const std::vector<int64_t>& peaks = plan.predicted_peak_bytes[k];
    const int64_t worst = *std::max_element(peaks.begin(), peaks.end());
    if (worst > node_bytes / std::max(local_ranks, 1)) {
      throw InputError(fmt::format(
          "{}: {} is predicted to hold {} on its busiest rank, and {} rank(s) share this node's {} of memory; "
          "nothing was run (fewer or smaller layers, fewer microbatches in flight, recompute or more nodes would fit)",
          plan.scenario.path, plan.names[k], sim::FormatBytes(worst), local_ranks, sim::FormatBytes(node_bytes)));
    }
  }
}

// No collective call may happen here: a rank that fails leaves at any point, and the others
// must meet it in AnyRankFailed. `local_ranks`: the job's ranks on this node.
void MakePlan(const ExecuteFlags& f, int world, int rank, int local_ranks, Plan* out, OutputSet* outputs) {
  Plan& plan = *out;
  plan.report = f.json_path == "-" || f.trace_path == "-" ? stderr : stdout;
  plan.scenario = sim::LoadScenario(f.scenario, f.sets);
  const sim::Scenario& sc = plan.scenario;
  plan.deadline = ParseTimeout(f.timeout);
  plan.hooks = ParseFault(f.inject_fault, f.fault_given, sc.pipeline.ranks, sc.pipeline.steps);
  plan.config = TrainingConfigFor(sc);
  plan.backend = BackendFor(f.backend, sc);
  if (world != sc.pipeline.ranks) {
    throw InputError(fmt::format("{}: pipeline.ranks is {} but the MPI job has {} process(es); run it as "
                                 "`mpirun -np {} stagecraft execute {}`",
                                 sc.path, sc.pipeline.ranks, world, sc.pipeline.ranks, sc.path));
  }
  plan.names = ScenarioScheduleNames(sc, rank == 0);
  CheckScheduleSizes(sc.pipeline, plan.names, f.max_ops);
  plan.schedules = ScenarioSchedules(sc.pipeline, plan.names);
  // This rank feeds inputs if it holds stage 0 and scores targets if it holds the last stage,
  // in any of the schedules (placement decides: under V the last stage is on rank 0).
  for (const Schedule& s : plan.schedules) {
    plan.feeds |= s.shape.RankOf(0) == rank;
    plan.scores |= s.shape.RankOf(s.stages() - 1) == rank;
  }
  CheckOutputs(f, rank, &plan, outputs);
  for (const Schedule& s : plan.schedules) plan.layers.push_back(sim::StageLayers(sc, s.stages()));
  // A run the simulator predicts will not fit in the scenario's device memory (or in this
  // node's) is refused here, before any rank allocates anything.
  const sim::Topology topo(sc.topology);
  std::vector<Prediction> predictions;
  for (const Schedule& s : plan.schedules) predictions.push_back(Predict(sc, topo, s));
  RefusePredictedOom(sc, predictions);
  for (const Prediction& p : predictions) {
    std::vector<int64_t>& peaks = plan.predicted_peak_bytes.emplace_back(static_cast<size_t>(world), 0);
    for (const auto& r : p.metrics.ranks_detail) {
      if (r.rank >= 0 && r.rank < world) peaks[static_cast<size_t>(r.rank)] = r.peak_memory_bytes;
    }
  }
  RefuseMoreThanThisNodeHolds(plan, local_ranks);
}

// The run of every schedule on this rank; rank 0 returns their measurements. A failure is
// printed by the rank it happens on, which aborts the job.
std::vector<MeasuredSchedule> RunSchedules(const ExecuteFlags& f, const Plan& plan, Device& device,
                                           Transport& transport) {
  const sim::Scenario& sc = plan.scenario;
  const int rank = transport.rank();
  std::vector<MeasuredSchedule> measured;
  exec::SetupRounds setup(transport);
  const int64_t total = static_cast<int64_t>(sc.pipeline.microbatches) * sc.pipeline.steps;
  const Dataset data = MakeDataset(device, plan.config, total, plan.feeds, plan.scores, [&] { setup.Beat(); });
  if (rank == 0) {
    std::fprintf(plan.report, "scenario %s: %d ranks (%s/%s), %d microbatches x %d samples, %d step(s), %s lr %g\n",
                 Printable(sc.name).c_str(), sc.pipeline.ranks, device.Name().c_str(), transport.Name().c_str(),
                 sc.pipeline.microbatches, sc.pipeline.microbatch_size, sc.pipeline.steps,
                 plan.config.optimizer.c_str(), plan.config.lr);
    std::fflush(plan.report);
  }
  ProgressFile progress(plan.partial_path, MeasuredFile(sc, device.Name(), {}),
                        static_cast<int>(plan.schedules.size()));
  if (progress.enabled() && rank == 0) {
    std::error_code ignored;
    std::filesystem::remove(progress.path(), ignored);  // an older run's, not this one's
  }
  for (size_t k = 0; k < plan.schedules.size(); ++k) {
    const Schedule& s = plan.schedules[k];
    TrainingConfig config = plan.config;
    config.layers_per_stage = plan.layers[k];
    RunHooks hooks = plan.hooks;
    const RunHooks::StepFn print = ProgressPrinter(s.name, config, s.microbatches, plan.report);
    progress.Start(s.name, s.steps);
    hooks.on_step = [&progress, print, last_end = int64_t{0}](const StepProgress& p) mutable {
      print(p);
      if (progress.enabled()) progress.Step(p, p.end_ns - last_end);
      last_end = p.end_ns;
    };
    // What the simulator predicts this rank will hold, faulted in before the clock starts: a
    // run's first step would otherwise pay for fresh pages that no later step pays for.
    device.Reserve(plan.predicted_peak_bytes[k].at(static_cast<size_t>(rank)));
    const RankRun run = RunRank(s, config, data, device, transport, hooks);
    device.ReleaseCached();  // the next schedule's buffers are other sizes
    const std::vector<std::string> all = NamingTimeout([&] { return transport.Gather(SerializeRankRun(run), 0); },
                                                       [&] { return "gathering the measurements of " + s.name; });
    if (rank == 0) measured.push_back(Measure(s, sc, all));
    // The rank that keeps the progress file learns what is complete.
    std::string done = rank == 0 && !f.json_path.empty() ? MetricsFileToJson(MeasuredFile(sc, device.Name(), measured))
                                                         : std::string();
    if (!f.json_path.empty()) {
      NamingTimeout([&] { transport.Broadcast(&done, 0); }, [&] { return "sharing the measurements of " + s.name; });
    }
    if (progress.enabled()) {
      progress.SetDone(done);
      if (rank == 0) progress.Write();
    }
  }
  return measured;
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
  const sim::Scenario& sc = plan.scenario;
  exec::ProcessRuntime runtime = StartRuntime(plan.backend, sc, plan.deadline);
  std::vector<MeasuredSchedule> measured;
  try {
    measured = RunSchedules(f, plan, *runtime.device, *runtime.transport);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "stagecraft: error: rank %d (%s): %s\n", rank, HostName().c_str(), Printable(e.what()).c_str());
    runtime.transport->Abort(1);
  }
  if (rank != 0) return 0;
  // Everything is computed before anything is written: an error leaves no partial output.
  if (plan.json >= 0) outputs.Set(plan.json, MetricsFileToJson(MeasuredFile(sc, runtime.device->Name(), measured)));
  for (size_t k = 0; k < plan.traces.size(); ++k) outputs.Set(plan.traces[k], TraceToJson(measured[k].trace));
  try {
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
  const std::string table = MeasuredTable(sc, measured);
  std::fwrite(table.data(), 1, table.size(), plan.report);
  return 0;
}

}  // namespace

Command AddExecuteCommand(CLI::App& root) {
  auto flags = std::make_shared<ExecuteFlags>();
  CLI::App* app = root.add_subcommand("execute", "Run a scenario's schedules for real under mpirun and measure them");
  app->add_option("scenario", flags->scenario, "Scenario YAML (with model.mlp and training)")->required();
  app->add_option("--set", flags->sets, "Override a scenario key: --set pipeline.microbatches=32 (repeatable)");
  app->add_option("--json", flags->json_path,
                  "Write the measured metrics of every schedule (plus losses) as JSON (- for standard output); a "
                  "file OUT keeps OUT.partial while the run lasts");
  app->add_option("--trace", flags->trace_path,
                  "Write the measured trace (one file per schedule when several; - for standard output)");
  app->add_option("--timeout", flags->timeout,
                  "How long any wait (a transfer, a barrier, the gather) may take before the run is called hung and "
                  "every rank exits non-zero, e.g. 30s")
      ->default_val("300s");
  CLI::Option* fault = app->add_option("--inject-fault", flags->inject_fault,
                  "Testing failure handling: RANK:STEP[:throw|hang|nan|oom] makes that rank throw (default), hang, "
                  "poison a weight with NaN, or fail an allocation at that step");
  AddBackendOption(app, &flags->backend);
  AddMaxOpsOption(app, &flags->max_ops);
  return {app, [flags, fault] {
            flags->fault_given = fault->count() > 0;
            return Run(*flags);
          }};
}

}  // namespace stagecraft::cli
