// `stagecraft plan`: the fastest layout and schedule for a model on N devices and a global
// batch (harness/plan.h). It prints the ranking, why the leaders win, what was rejected and the
// Pareto front of throughput against memory; --json writes every simulated configuration,
// --write-best the winner as a scenario that simulate and execute take, --plot the front as PNG.
#include <unistd.h>

#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "command_support.h"
#include "commands.h"
#include "stagecraft/base/error.h"
#include "stagecraft/harness/plan.h"
#include "stagecraft/sim/scenario_checks.h"

namespace stagecraft::cli {
namespace {

struct PlanFlags {
  std::string scenario;
  std::vector<std::string> sets;
  int gpus = 0;
  int64_t global_batch = 0;
  std::string memory_limit;
  std::vector<int> tensor_parallel, context_parallel;
  std::vector<std::string> schedules, recompute, partitions;
  std::vector<int> zero;
  int max_microbatch_size = 0;
  int max_chunks = 8;
  int top = 10;
  int threads = 0;
  int refine = 3;
  int64_t search_evaluations = 0;
  double refine_seconds = 20;
  int64_t max_ops = 0;
  int64_t max_plan_ops = harness::kDefaultMaxPlanOps;
  std::string json_path, best_path, plot_path;
};

harness::PlanOptions OptionsOf(const PlanFlags& f) {
  harness::PlanOptions o;
  o.gpus = f.gpus;
  o.global_batch = f.global_batch;
  o.memory_limit_bytes = harness::ParsePlanMemoryLimit(f.memory_limit, "--memory-limit");
  o.tensor_parallel = f.tensor_parallel;
  o.context_parallel = f.context_parallel;
  o.schedules = f.schedules;
  o.recompute = harness::ParseRecomputeNames(f.recompute, "--recompute");
  o.partitions = harness::ParsePartitionNames(f.partitions, "--partition");
  o.zero = f.zero;
  o.max_microbatch_size = f.max_microbatch_size;
  o.max_chunks = f.max_chunks;
  o.top = f.top;
  o.threads = f.threads;
  o.refine = f.refine;
  o.search_evaluations = f.search_evaluations;
  o.refine_seconds = f.refine_seconds;
  o.max_ops = f.max_ops;
  o.max_plan_ops = f.max_plan_ops;
  // Progress on a terminal only; the summary line comes at the end either way. There a note made
  // before the plan's work (the budget's narrowing) is said at once too, and the report repeats
  // it at the end (elsewhere a failed plan keeps to its one error line).
  if (isatty(STDERR_FILENO)) {
    o.note = [](const std::string& note) {
      std::fprintf(stderr, "plan: note: %s\n", note.c_str());
      std::fflush(stderr);
    };
    o.progress = [](const harness::PlanProgress& p) {
      std::fprintf(stderr, "\rplan: %lld of %lld candidates looked at, %lld simulated, %.1f s ",
                   static_cast<long long>(p.done), static_cast<long long>(p.candidates),
                   static_cast<long long>(p.simulated), p.seconds);
      std::fflush(stderr);
    };
  }
  return o;
}

int Run(const PlanFlags& f) {
  // The plan replaces the pipeline's layout: only the rest of the scenario must hold.
  const sim::Scenario sc = sim::LoadScenarioForNewLayout(f.scenario, f.sets);
  RefuseWorkload(sc, "plan");
  const harness::PlanOptions options = OptionsOf(f);
  // Every output is checked before the search, and written only after it.
  OutputSet outputs;
  const int json = f.json_path.empty() ? -1 : outputs.Add(f.json_path, "--json");
  const int best = f.best_path.empty() ? -1 : outputs.Add(f.best_path, "--write-best");
  const int plot = f.plot_path.empty() ? -1 : outputs.Add(f.plot_path, "--plot");
  const harness::PlanResult r = harness::Plan(sc, options);
  if (options.progress) std::fputs("\n", stderr);
  std::fprintf(stderr, "plan: %lld configurations enumerated over %d layouts, %lld simulated, in %.1f s on %d threads\n",
               static_cast<long long>(r.enumerated), r.layouts, static_cast<long long>(r.simulated), r.seconds,
               r.threads);
  if (json >= 0) outputs.Set(json, harness::PlanJson(r));
  if (plot >= 0) outputs.Set(plot, harness::ParetoPng(r));
  if (best >= 0) outputs.Set(best, harness::BestScenarioText(f.scenario, f.sets, r, options));
  outputs.Commit();
  WriteReport(outputs, harness::DescribePlan(r, options.top));
  if (best >= 0) WriteReport(outputs, fmt::format("wrote {}: the best as a scenario\n", outputs.target(best).path));
  return 0;
}

}  // namespace

Command AddPlanCommand(CLI::App& root) {
  auto flags = std::make_shared<PlanFlags>();
  CLI::App* app = root.add_subcommand(
      "plan", "Find the fastest layout (P x D x T x C), batch split, schedule and recompute for N devices and a batch");
  AddScenarioOptions(app, &flags->scenario, &flags->sets, "Scenario YAML: the model, the device and the topology",
                     "topology.nodes=4");
  app->add_option("--gpus", flags->gpus, "Devices of the job (P x D x T x C)")->required();
  app->add_option("--global-batch", flags->global_batch, "Samples per optimizer step (D x microbatch size x microbatches)")
      ->required();
  app->add_option("--memory-limit", flags->memory_limit,
                  "What a device may hold (60GiB); default pipeline.memory_limit, else the device memory");
  app->add_option("--tensor-parallel", flags->tensor_parallel, "The T to try (1,2,4,8); default all that fit a node")
      ->delimiter(',');
  app->add_option("--context-parallel", flags->context_parallel,
                  "The C to try (1,2,4); default 1, the scenario's, and each that leaves a device 4096 tokens or more")
      ->delimiter(',');
  app->add_option("--schedules", flags->schedules, "The schedules to try (1f1b,zb-h1,...,auto); default all")
      ->delimiter(',');
  app->add_option("--recompute", flags->recompute, "none,selective,full (default all that apply; selective: each set of modules docs/plan.md names)")->delimiter(',');
  app->add_option("--partition", flags->partitions, "even,balanced (default both where they differ)")->delimiter(',');
  app->add_option("--zero", flags->zero, "ZeRO stages to search, 0 to 3 (default 0,1 where D > 1)")->delimiter(',');
  app->add_option("--max-microbatch-size", flags->max_microbatch_size, "Largest microbatch to try (default 0: no bound)");
  app->add_option("--max-chunks", flags->max_chunks, "Largest v for interleaved (default 8)");
  app->add_option("--top", flags->top, "Configurations kept exact and printed (default 10)");
  app->add_option("--threads", flags->threads,
                  fmt::format("Simulation threads, at most {} here (4 per core, at most 256; default 0: every core)",
                              harness::MaxPlanThreads()));
  app->add_option("--refine", flags->refine, "Leading layouts to search an `auto` order for (default 3; 0: none)");
  app->add_option("--search-evaluations", flags->search_evaluations,
                  "auto's moves (default pipeline.search_evaluations)");
  app->add_option("--refine-seconds", flags->refine_seconds, "Skip an auto search estimated longer than this (default 20)");
  app->add_option("--json", flags->json_path, "Write every simulated configuration with its metrics as JSON");
  app->add_option("--write-best", flags->best_path, "Write the best configuration as a scenario YAML");
  app->add_option("--plot", flags->plot_path, "Draw the Pareto front of throughput against memory as a PNG");
  AddMaxOpsOption(app, &flags->max_ops);
  app->add_option("--max-plan-ops", flags->max_plan_ops,
                  "Bound the whole plan: the ops of every configuration summed; past it those with the most "
                  "microbatches are left out, with a note")
      ->check(CLI::Range(int64_t{1}, int64_t{1'000'000'000'000'000}))
      ->capture_default_str();
  return {app, [flags] { return Run(*flags); }};
}

}  // namespace stagecraft::cli
