// `stagecraft replay RUN.json --trace TRACE`: simulate from a measured run's own op times
// (harness/replay.h). Without overrides it replays the schedule the trace measured, each op at
// its measured time; with --set (pipeline.schedule, pipeline.microbatches, ...) it predicts
// what-if runs from the run's median pass times per stage. Outputs are simulate's (metrics
// JSON, traces), so compare and the viewer take them as they are.
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
#include "stagecraft/scenario/scenario.h"
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
  const Trace trace = harness::ReadTraceInFull(f.trace);  // every event usable
  // The outputs are named by the replay's schedules (the trace's, or the overrides'): they are
  // checked once those are known, and written only when everything is computed.
  const harness::Replay replay = harness::ReplayRun(run, f.run, trace, f.trace, f.sets, f.max_ops);
  const sim::Scenario& sc = replay.scenario;
  const std::vector<harness::Prediction>& replays = replay.predictions;
  const ScheduleMetrics* measured = replay.measured;
  std::vector<std::string> names;
  for (const harness::Prediction& p : replays) names.push_back(p.metrics.schedule);
  OutputSet outputs;
  const int json = f.json_path.empty() ? -1 : outputs.Add(f.json_path, "--json");
  const std::vector<int> traces = AddTraceOutputs(outputs, f.trace_path, names, "--trace-out");
  SetPredictedOutputs(outputs, json, traces, sc, replays.front().cost_source, replays);
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
                                            error.value_or(0), ErrorPp(m.bubble_fraction, measured->bubble_fraction))
                              : "what-if, from the run's median pass times");
  }
  WriteReport(outputs, table);
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
