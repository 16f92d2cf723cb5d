// `stagecraft search`: an op order per rank for the scenario's job (harness/search.h), written as
// a PyTorch-style CSV of one step that pipeline.schedule can name; it prints the start, the
// result and why the result is shorter. --trace writes the start's and the result's predicted
// traces, which the viewer shows on one time axis.
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "command_support.h"
#include "commands.h"
#include "stagecraft/base/error.h"
#include "stagecraft/base/output_file.h"
#include "stagecraft/harness/predict.h"
#include "stagecraft/harness/search.h"
#include "stagecraft/schedules/csv_io.h"
#include "stagecraft/schedules/lower.h"
#include "stagecraft/sim/scenario_checks.h"
#include "stagecraft/sim/topology.h"

namespace stagecraft::cli {
namespace {

struct SearchFlags {
  std::string scenario;
  std::vector<std::string> sets;
  std::string out_path;
  std::string trace_path;
  std::string json_path;
  std::string memory_limit;
  double budget = 9;
  int64_t evaluations = 0;  // 0: not given (the budget decides)
  int64_t seed = 1;
  std::string from;
};

int Run(const SearchFlags& f) {
  const sim::Scenario sc = sim::LoadScenario(f.scenario, f.sets);
  RefuseWorkload(sc, "search");
  harness::SearchOptions options;
  // A budget of 0 could not even judge the starts (NaN fails the test too).
  if (!(f.budget > 0 && f.budget <= harness::kMaxSearchBudgetSeconds)) {
    throw InputError(fmt::format("--budget: {} is not a number of seconds in (0, {:g}]", f.budget,
                                 harness::kMaxSearchBudgetSeconds));
  }
  options.budget_seconds = f.budget;
  options.max_evaluations = f.evaluations;
  options.seed = static_cast<uint64_t>(f.seed);
  options.from = f.from;
  if (!f.memory_limit.empty()) options.memory_limit = harness::SearchMemoryLimit::Parse(f.memory_limit, "--memory-limit");
  // Every output is checked before the search, and written only after it.
  OutputSet outputs;
  const int csv = outputs.Add(f.out_path, "--out");
  const int json = f.json_path.empty() ? -1 : outputs.Add(f.json_path, "--json");
  // The start's and the result's traces go beside --trace, which a stream cannot take: refused
  // before the search (their names are known only after it).
  if (!f.trace_path.empty() && CheckOutputPath(f.trace_path, "--trace").kind != OutputTarget::Kind::kFile) {
    throw InputError(fmt::format("--trace {}: the start's and the result's traces go beside it (<stem>.<schedule><ext>), "
                                 "and a stream takes one; name a file",
                                 f.trace_path));
  }
  harness::SearchResult r = harness::SearchSchedule(sc, options);
  r.best.name = "searched";
  std::vector<int> traces;
  if (!f.trace_path.empty() || json >= 0) {
    sim::Scenario one_step = sc;
    one_step.pipeline.steps = 1;
    const sim::Topology topo(one_step.topology);
    std::vector<harness::Prediction> predictions;
    for (const schedules::Schedule* s : {&r.start, &r.best}) {
      predictions.push_back(
          harness::Predict(one_step, topo, schedules::Lower(*s, one_step.pipeline.p2p, one_step.pipeline.p2p_buffers)));
    }
    if (!f.trace_path.empty()) traces = AddTraceOutputs(outputs, f.trace_path, {r.start_name, r.best.name});
    SetPredictedOutputs(outputs, json, traces, one_step, predictions.front().cost_source, predictions);
  }
  outputs.Set(csv, schedules::ExportCsv(r.best, schedules::CsvForm::kComputeOnly));
  outputs.Commit();
  const std::string text = harness::DescribeSearch(r) +
                           fmt::format("wrote {} (one step; name it as pipeline.schedule to simulate or execute it)\n",
                                       outputs.target(csv).path);
  WriteReport(outputs, text);
  return 0;
}

}  // namespace

Command AddSearchCommand(CLI::App& root) {
  auto flags = std::make_shared<SearchFlags>();
  CLI::App* app = root.add_subcommand(
      "search", "Search an op order per rank that shortens the simulated step under a memory limit");
  AddScenarioOptions(app, &flags->scenario, &flags->sets);
  app->add_option("--out", flags->out_path, "Write the schedule as a PyTorch-style CSV of one step (- for standard output)")
      ->required();
  app->add_option("--memory-limit", flags->memory_limit,
                  "Per rank: a size (60GiB; weights, gradients and optimizer state included) or k·p forwards' "
                  "activations (2p); default pipeline.memory_limit, else the device memory");
  app->add_option("--budget", flags->budget, "Seconds of search, the starting generators included (default 9)");
  // 0 moves would read as the search's own 0, "no limit".
  app->add_option("--evaluations", flags->evaluations, "Stop after this many moves instead (a repeatable search)")
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 40).description(""));
  app->add_option("--seed", flags->seed, "Random seed (default 1)")
      ->check(CLI::Range(int64_t{0}, std::numeric_limits<int64_t>::max()).description(""));
  app->add_option("--from", flags->from, "Start from this generator instead of the fastest within the limit");
  app->add_option("--trace", flags->trace_path,
                  "Write the start's and the result's predicted traces (<stem>.<schedule><ext>) for the viewer");
  app->add_option("--json", flags->json_path, "Write the start's and the result's predicted metrics as JSON");
  return {app, [flags] { return Run(*flags); }};
}

}  // namespace stagecraft::cli
