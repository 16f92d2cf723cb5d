// `stagecraft simulate`: load a scenario, simulate each of its schedules on its topology and
// print the comparison table; optionally write the metrics JSON and one trace per schedule.
#include <algorithm>
#include <cstdio>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include <fmt/format.h>

#include "commands.h"
#include "stagecraft/harness/explain.h"
#include "stagecraft/harness/predict.h"
#include "stagecraft/harness/workload.h"
#include "command_support.h"
#include "stagecraft/base/output_file.h"
#include "stagecraft/base/printable.h"
#include "stagecraft/schedules/metrics.h"
#include "stagecraft/schedules/metrics_json.h"
#include "stagecraft/schedules/trace.h"
#include "stagecraft/sim/scenario_checks.h"
#include "stagecraft/sim/topology.h"
#include "stagecraft/scenario/units.h"

namespace stagecraft::cli {
namespace {

using namespace stagecraft::schedules;
using namespace stagecraft::sim;

struct SimulateFlags {
  std::string scenario;
  std::vector<std::string> sets;
  std::string json_path;
  std::string trace_path;
  std::string explain_json_path;
  int64_t max_ops = 0;
  bool explain = false;
};

// With copies to host memory (pipeline.offload): each schedule's fullest node's host memory, and
// the rank that waited longest for its RELOADs.
std::string HostLines(const std::vector<harness::Prediction>& outcomes) {
  std::string out;
  for (const harness::Prediction& o : outcomes) {
    const std::vector<int64_t>& nodes = o.result.node_peak_host_memory_bytes;
    if (nodes.empty()) continue;
    if (out.empty()) {
      out = "host memory (pipeline.offload): stashes offloaded per stage and step, the fullest node, the longest "
            "wait for reloads per step\n";
    }
    int64_t offloads = 0;  // stage 0's
    for (const auto& ops : o.schedule.ops) {
      offloads += std::count_if(ops.begin(), ops.end(), [](const Op& op) {
        return op.kind == OpKind::kOffload && op.tensor == Tensor::kActivations && op.stage == 0;
      });
    }
    const auto node = std::max_element(nodes.begin(), nodes.end()) - nodes.begin();
    const auto& ranks = o.metrics.ranks_detail;
    const auto waited = std::max_element(ranks.begin(), ranks.end(), [](const auto& a, const auto& b) {
      return a.offload_wait_ms < b.offload_wait_ms;
    });
    out += fmt::format("{:<12} {} of {}; node {:>2}: {}; rank {:>2} waited {:.3f} ms\n", Printable(o.metrics.schedule),
                       offloads / std::max(1, o.schedule.steps), o.schedule.microbatches, node,
                       FormatBytes(nodes[static_cast<size_t>(node)]), waited->rank,
                       waited->offload_wait_ms / std::max(1, o.metrics.steps));
  }
  return out;
}

std::string Table(const Scenario& sc, const std::string& cost_source, const std::vector<harness::Prediction>& outcomes) {
  const PipelineSpec& p = sc.pipeline;
  // Beside the pipeline, the replicas and the tensor group, when there are any.
  const std::string around =
      p.world() == p.ranks
          ? ""
          : fmt::format(" x {} replica(s){} x {}-way tensor parallel{} = {} devices", p.data_parallel,
                        p.context_parallel > 1 ? fmt::format(" x {}-way context parallel", p.context_parallel) : "",
                        p.tensor_parallel, p.sequence_parallel ? " (sequence parallel)" : "", p.world());
  std::string out = fmt::format("scenario {}: {} ranks{}, {} microbatches x {} samples, {} step(s); costs: {}\n",
                                Printable(sc.name), p.ranks, around, p.microbatches, p.microbatch_size, p.steps,
                                cost_source);
  // The replicas' gradient all-reduce: its algorithm and the least it takes, where longest.
  const harness::Prediction* longest = nullptr;
  for (const harness::Prediction& o : outcomes) {
    if (o.gradient_reduce && (longest == nullptr || o.gradient_reduce->alone_ns > longest->gradient_reduce->alone_ns)) {
      longest = &o;
    }
  }
  if (p.zero >= 2 && p.replicas() > 1) {
    // ZeRO-2 and 3 reduce-scatter in every backward (and ZeRO-3 gathers in every op), inside the ops.
    const bool three = p.zero >= 3;
    out += fmt::format("ZeRO-{} over {} replicas: {} in every {}, beside its compute{}\n", p.zero, p.replicas(),
                       three ? "the weights gathered" : "the gradients reduce-scattered",
                       three ? "forward and backward, the gradients reduce-scattered in every backward" : "backward",
                       three ? "" : "; the updated weights all-gathered after the step");
  } else if (longest != nullptr) {
    const harness::Prediction::GradientReduce& g = *longest->gradient_reduce;
    out += fmt::format("gradient all-reduce over {} replicas, a stage's alone: up to {:.3f} ms ({}, stage {} of {})\n",
                       p.replicas(), g.alone_ns * 1e-6, g.algorithm, g.stage, Printable(longest->metrics.schedule));
  }
  out += fmt::format("{:<12} {:>13} {:>20} {:>8} {:>24}  {}\n", "schedule", "step time", "throughput", "bubble",
                     "peak memory (worst rank)", "OOM");
  const harness::Prediction* best = nullptr;
  for (const harness::Prediction& o : outcomes) {
    const ScheduleMetrics& m = o.metrics;
    const int worst = m.WorstMemoryRank();
    out += fmt::format("{:<12} {:>10.3f} ms {:>10} samples/s {:>7.2f}% {:>14} (rank {:>2})  {}\n", Printable(m.schedule),
                       m.step_time_ms, ThroughputText(m), 100 * m.bubble_fraction,
                       FormatBytes(m.ranks_detail[worst].peak_memory_bytes), worst, m.AnyOom() ? "OOM" : "no");
    // Fastest that fits; on a tie the one that needs less memory.
    const auto peak = [](const ScheduleMetrics& x) { return x.ranks_detail[x.WorstMemoryRank()].peak_memory_bytes; };
    if (!m.AnyOom() && (best == nullptr || m.step_time_ms < best->metrics.step_time_ms ||
                        (m.step_time_ms == best->metrics.step_time_ms && peak(m) < peak(best->metrics)))) {
      best = &o;
    }
  }
  out += "busiest rank's memory by term: weights / gradients / optimizer state / activations (in flight) "
         "/ other\n";
  for (const harness::Prediction& o : outcomes) {
    const int worst = o.metrics.WorstMemoryRank();
    const harness::MemoryTerms t = harness::MemoryTermsOf(o, worst);
    out += fmt::format("{:<12} rank {:>2}: {} / {} / {} / {} ({}) / {}: {}\n", Printable(o.metrics.schedule), worst,
                       FormatBytes(t.weights), FormatBytes(t.gradients), FormatBytes(t.optimizer),
                       FormatBytes(t.activations), t.inflight, FormatBytes(t.other), t.Dominant());
  }
  out += HostLines(outcomes);
  if (best != nullptr && outcomes.size() > 1) {
    out += fmt::format("fastest that fits: {} ({:.3f} ms per step, bubble {:.2f}%)\n", Printable(best->metrics.schedule),
                       best->metrics.step_time_ms, 100 * best->metrics.bubble_fraction);
  } else if (best == nullptr) {
    out += "no schedule fits in device memory\n";
  }
  return out;
}

// One line when the scenario describes this machine (costs measured here, or a CPU device)
// and puts more ranks on one of its nodes than this machine has cores while giving each rank a
// device of its own: ranks sharing a core are then not modelled (pipeline.ranks_per_device is
// how to state them).
std::string SharedCoreWarning(const Scenario& sc, const std::string& cost_source) {
  const bool this_machine =
      cost_source.starts_with("profile:") || sc.topology.DeviceAt(sc.pipeline.DeviceOf(0)).name.starts_with("cpu");
  const int per_node =
      std::min(sc.pipeline.ranks, sc.topology.explicit_graph() ? 1 : std::max(sc.topology.DevicesOnNode(0), 1));
  const unsigned cores = std::thread::hardware_concurrency();
  if (!this_machine || cores == 0 || sc.pipeline.ranks_per_device > 1 || per_node <= static_cast<int>(cores)) {
    return "";
  }
  return fmt::format("warning: {} ranks on one node but this machine has {} cores: ranks sharing a core are not "
                     "modelled (each rank is predicted with a core of its own; pipeline.ranks_per_device states "
                     "the sharing)\n",
                     per_node, cores);
}

// A multi-model workload (tasks:): each task alone, then the tasks placed on the devices.
int RunWorkload(const SimulateFlags& f, const Scenario& sc) {
  if (f.explain || !f.explain_json_path.empty()) {
    throw InputError(fmt::format("{}: a workload's tasks each have their own model: --explain one task's model in a "
                                 "scenario of its own",
                                 f.explain ? "--explain" : "--explain-json"));
  }
  OutputSet outputs;
  const int json = f.json_path.empty() ? -1 : outputs.Add(f.json_path, "--json");
  const int trace = f.trace_path.empty() ? -1 : outputs.Add(f.trace_path, "--trace");
  for (const TaskSpec& task : sc.tasks) harness::CheckScheduleSizes(task.pipeline, task.pipeline.schedules, f.max_ops);
  const harness::WorkloadPrediction workload = harness::PredictWorkload(sc, Topology(sc.topology));
  if (json >= 0) outputs.Set(json, MetricsFileToJson(harness::PredictedWorkloadFile(sc, workload)));
  if (trace >= 0) outputs.Set(trace, TraceToJson(harness::WorkloadTrace(sc, workload)));
  outputs.Commit();
  WriteReport(outputs, harness::WorkloadText(sc, workload));
  return 0;
}

int Run(const SimulateFlags& f) {
  const Scenario sc = LoadScenario(f.scenario, f.sets);
  CheckPipeMareRuns(sc);
  if (!sc.tasks.empty()) return RunWorkload(f, sc);
  if (f.explain) harness::CheckExplainable(sc, "--explain");
  if (!f.explain_json_path.empty()) harness::CheckExplainable(sc, "--explain-json");
  const std::vector<std::string> names = harness::ScenarioScheduleNames(sc, true);
  harness::CheckScheduleSizes(sc.pipeline, names, f.max_ops);
  // Every output is checked before any work, and written only once everything is computed: an
  // error leaves no output behind.
  OutputSet outputs;
  const int json = f.json_path.empty() ? -1 : outputs.Add(f.json_path, "--json");
  const int explain_json = f.explain_json_path.empty() ? -1 : outputs.Add(f.explain_json_path, "--explain-json");
  const std::vector<int> traces = AddTraceOutputs(outputs, f.trace_path, names);
  const Topology topo(sc.topology);
  std::vector<harness::Prediction> outcomes;
  for (Schedule& s : harness::ScenarioSchedules(sc, names)) outcomes.push_back(harness::Predict(sc, topo, std::move(s)));
  const std::string& cost_source = outcomes.front().cost_source;
  const harness::Explanation explanation = f.explain || explain_json >= 0
                                               ? harness::Explain(sc, f.explain ? "--explain" : "--explain-json")
                                               : harness::Explanation{};
  const std::string explained = f.explain ? harness::ExplainText(sc, explanation) : "";
  SetPredictedOutputs(outputs, json, traces, sc, cost_source, outcomes);
  if (explain_json >= 0) outputs.Set(explain_json, harness::ExplainJson(sc, cost_source, explanation));
  outputs.Commit();
  if (const std::string warning = SharedCoreWarning(sc, cost_source); !warning.empty()) {
    std::fwrite(warning.data(), 1, warning.size(), stderr);
  }
  // With an output on standard output, the table goes to standard error.
  WriteReport(outputs, Table(sc, cost_source, outcomes));
  WriteReport(outputs, explained);
  return 0;
}

}  // namespace

Command AddSimulateCommand(CLI::App& root) {
  auto flags = std::make_shared<SimulateFlags>();
  CLI::App* app = root.add_subcommand("simulate", "Predict bubble, memory and throughput of a scenario's schedules");
  AddScenarioOptions(app, &flags->scenario, &flags->sets);
  app->add_option("--json", flags->json_path, "Write the metrics of every schedule as JSON (- for standard output)");
  app->add_option("--trace", flags->trace_path,
                  "Write a Chrome/Perfetto trace (one file per schedule when several; - for standard output)");
  app->add_flag("--explain", flags->explain,
                "Print one layer's kernels as the roofline cost model times them (time, FLOPs, bytes, bound)");
  app->add_option("--explain-json", flags->explain_json_path,
                  "Write --explain's kernels, and the device they were timed on with every field resolved, as JSON "
                  "(- for standard output)");
  AddMaxOpsOption(app, &flags->max_ops);
  return {app, [flags] { return Run(*flags); }};
}

}  // namespace stagecraft::cli
