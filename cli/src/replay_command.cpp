// `stagecraft replay RUN.json --trace TRACE`: simulate from a measured run's own op times
// (harness/replay.h). Without overrides it replays the schedule the trace measured, each op at
// its measured time; with --set (pipeline.schedule, pipeline.microbatches, ...) it predicts
// what-if runs from the run's median pass times per stage. Outputs are simulate's (metrics
// JSON, traces), so compare and the viewer take them as they are.
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "command_support.h"
#include "commands.h"
#include "stagecraft/base/error.h"
#include "stagecraft/base/input_file.h"
#include "stagecraft/base/output_file.h"
#include "stagecraft/base/printable.h"
#include "stagecraft/base/stats.h"
#include "stagecraft/harness/predict.h"
#include "stagecraft/harness/replay.h"
#include "stagecraft/schedules/metrics_json.h"
#include "stagecraft/schedules/trace.h"
#include "stagecraft/sim/cost_models.h"
#include "stagecraft/sim/scenario.h"
#include "stagecraft/sim/topology.h"

namespace stagecraft::cli {
namespace {

using namespace stagecraft::schedules;

struct ReplayFlags {
  std::string run;
  std::string trace;
  std::vector<std::string> sets;
  std::string json_path;
  std::string trace_path;
  int64_t max_ops = 0;
};

int Run(const ReplayFlags& f) {
  const MetricsFile run = MetricsFileFromJson(ReadInputFile(f.run, kMaxJsonBytes, "a metrics file"), f.run);
  if (run.source != "measured") {
    throw InputError(fmt::format("{}: source is '{}': replay needs a measured run (execute --json)", f.run, run.source));
  }
  if (!run.scenario_file) {
    throw InputError(fmt::format("{}: the run does not say which scenario it ran (no scenario_file: written before "
                                 "replay existed); execute it again",
                                 f.run));
  }
  const Trace trace = TraceFromJson(ReadInputFile(f.trace, kMaxJsonBytes, "a trace"), f.trace).trace;
  if (trace.source != "measured") {
    throw InputError(fmt::format("{}: source is '{}': replay needs a measured trace (execute --trace)", f.trace,
                                 trace.source));
  }
  const ScheduleMetrics* measured = run.Find(trace.schedule);
  if (measured == nullptr) {
    throw InputError(fmt::format("{}: the trace is of schedule '{}', which {} did not run", f.trace,
                                 Printable(trace.schedule), f.run));
  }
  // The run as it was loaded, the trace's schedule unless the overrides name others, then the
  // what-if overrides.
  std::vector<std::string> sets = run.overrides;
  sets.push_back("pipeline.schedule=" + trace.schedule);
  sets.insert(sets.end(), f.sets.begin(), f.sets.end());
  const sim::Scenario sc = sim::LoadScenario(*run.scenario_file, sets);
  const std::vector<std::string> names = harness::ScenarioScheduleNames(sc, true);
  harness::CheckScheduleSizes(sc.pipeline, names, f.max_ops);
  OutputSet outputs;
  const int json = f.json_path.empty() ? -1 : outputs.Add(f.json_path, "--json");
  const std::vector<int> traces = AddTraceOutputs(outputs, f.trace_path, names);
  const sim::Topology topo(sc.topology);
  const double overhead = measured->executor ? measured->executor->overhead_ns_per_op : 0.0;
  std::vector<harness::Prediction> replays;
  for (Schedule& s : harness::ScenarioSchedules(sc.pipeline, names)) {
    const bool same_run = s.name == trace.schedule && s.microbatches == measured->microbatches &&
                          s.steps == measured->steps && s.ranks() == measured->ranks &&
                          s.shape.chunks == measured->chunks;
    sim::CostTable costs = harness::ReplayCosts(s, sim::BuildCosts(sc, s), trace, f.trace, overhead, same_run);
    replays.push_back(harness::Predict(sc, topo, std::move(s), std::move(costs)));
  }
  if (json >= 0) {
    MetricsFile file;
    file.scenario = sc.name;
    file.source = "predicted";
    file.costs = replays.front().cost_source;
    for (const harness::Prediction& p : replays) file.schedules.push_back(p.metrics);
    outputs.Set(json, MetricsFileToJson(file));
  }
  for (size_t k = 0; k < traces.size(); ++k) {
    const harness::Prediction& p = replays[k];
    outputs.Set(traces[k], TraceToJson(BuildTrace(p.schedule, p.result, sc.name, "predicted", p.metrics)));
  }
  outputs.Commit();
  std::string table = fmt::format("replay of {} ({} on {} ranks, {} microbatches): measured step {:.3f} ms, bubble "
                                  "{:.2f}%\n",
                                  f.trace, Printable(trace.schedule), measured->ranks, measured->microbatches,
                                  measured->step_time_ms, 100 * measured->bubble_fraction);
  table += fmt::format("{:<12} {:>13} {:>8}  {}\n", "schedule", "step time", "bubble", "against the measured run");
  for (const harness::Prediction& p : replays) {
    const ScheduleMetrics& m = p.metrics;
    const bool same = !p.costs.op_ns.empty();
    const std::optional<double> error = RelativeErrorPct(m.step_time_ms, measured->step_time_ms);
    table += fmt::format("{:<12} {:>10.3f} ms {:>7.2f}%  {}\n", Printable(m.schedule), m.step_time_ms,
                         100 * m.bubble_fraction,
                         same ? fmt::format("replayed op for op: step {:+.1f}%, bubble {:+.2f} pp (the model's error)",
                                            error.value_or(0), 100 * (m.bubble_fraction - measured->bubble_fraction))
                              : "what-if, from the run's median pass times");
  }
  std::fwrite(table.data(), 1, table.size(), outputs.WritesStdout() ? stderr : stdout);
  return 0;
}

}  // namespace

Command AddReplayCommand(CLI::App& root) {
  auto flags = std::make_shared<ReplayFlags>();
  CLI::App* app = root.add_subcommand("replay", "Simulate from a measured run's own op times (same schedule or what-if)");
  app->add_option("run", flags->run, "Metrics of the measured run (execute --json)")->required();
  app->add_option("--trace", flags->trace, "The measured trace of one of its schedules (execute --trace)")->required();
  app->add_option("--set", flags->sets,
                  "What-if: override a scenario key, e.g. --set pipeline.schedule=zb-h1 (repeatable)");
  app->add_option("--json", flags->json_path, "Write the replayed metrics as JSON (- for standard output)");
  app->add_option("--trace-out", flags->trace_path, "Write the replayed trace(s) (one file per schedule when several)");
  AddMaxOpsOption(app, &flags->max_ops);
  return {app, [flags] { return Run(*flags); }};
}

}  // namespace stagecraft::cli
