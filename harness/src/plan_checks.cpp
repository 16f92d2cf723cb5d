// The plan's options checked against their ranges and the scenario, the context parallelism it
// tries, and its budget on the whole space (plan_space.h). Needs sim and schedules only, as
// plan_space.cpp.
#include <algorithm>
#include <cmath>
#include <map>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "plan_space.h"
#include "stagecraft/base/error.h"
#include "stagecraft/scenario/limits.h"
#include "stagecraft/scenario/validate.h"

namespace stagecraft::harness {

std::vector<int> DefaultContextParallel(const sim::Scenario& scenario, int gpus) {
  std::vector<int> out = {1};
  const sim::TransformerSpec* t = scenario.model.transformer ? &*scenario.model.transformer : nullptr;
  for (int c = 2; t != nullptr && c <= std::min(gpus, sim::kMaxTensorParallel); ++c) {  // pipeline.context_parallel's range
    const bool asked = c == scenario.pipeline.context_parallel || t->seq / c >= kMinContextTokens;
    if (asked && gpus % c == 0 && sim::ContextParallelProblem(scenario, c).empty()) out.push_back(c);
  }
  return out;
}

}  // namespace stagecraft::harness

namespace stagecraft::harness::detail {

std::vector<int> ContextsTried(const sim::Scenario& scenario, const PlanOptions& options) {
  std::vector<int> out =
      options.context_parallel.empty() ? DefaultContextParallel(scenario, options.gpus) : options.context_parallel;
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

namespace {

// The options' numbers, each against its range (the flags named, as the command takes them).
void CheckNumbers(const PlanOptions& o) {
  for (const int tp : o.tensor_parallel) {
    if (tp < 1 || tp > sim::kMaxTensorParallel) {
      throw InputError(fmt::format("--tensor-parallel: expected sizes from 1 to {}, got {}", sim::kMaxTensorParallel, tp));
    }
  }
  for (const int c : o.context_parallel) {  // pipeline.context_parallel's range
    if (c < 1 || c > sim::kMaxTensorParallel) {
      throw InputError(fmt::format("--context-parallel: expected sizes from 1 to {}, got {}", sim::kMaxTensorParallel, c));
    }
  }
  for (const int z : o.zero) {
    if (z < 0 || z > 3) throw InputError(fmt::format("--zero: expected 0, 1, 2 or 3, got {}", z));
  }
  if (o.max_microbatch_size < 0) {
    throw InputError(fmt::format("--max-microbatch-size: expected at least 1 (or 0: no bound), got {}", o.max_microbatch_size));
  }
  if (o.max_chunks < 2 || o.max_chunks > sim::kMaxChunks) {
    throw InputError(fmt::format("--max-chunks: expected from 2 to {}, got {}", sim::kMaxChunks, o.max_chunks));
  }
  if (o.top < 1) throw InputError(fmt::format("--top: expected at least 1, got {}", o.top));
  if (o.threads < 0 || o.threads > MaxPlanThreads()) {
    throw InputError(fmt::format("--threads: expected from 1 to {} (4 per core of this machine, at most 256), or 0 for "
                                 "one per core; got {}",
                                 MaxPlanThreads(), o.threads));
  }
  if (o.max_ops < 0) throw InputError(fmt::format("--max-ops: expected at least 1, got {}", o.max_ops));
  if (o.max_plan_ops < 0) throw InputError(fmt::format("--max-plan-ops: expected at least 1, got {}", o.max_plan_ops));
  if (o.refine < 0) throw InputError(fmt::format("--refine: expected at least 0 (0: no auto search), got {}", o.refine));
  if (o.search_evaluations < 0 || o.search_evaluations > sim::kMaxSearchEvaluations) {
    throw InputError(fmt::format("--search-evaluations: expected from 1 to {} (or 0: pipeline.search_evaluations), got {}",
                                 sim::kMaxSearchEvaluations, o.search_evaluations));
  }
  if (!(std::isfinite(o.refine_seconds) && o.refine_seconds >= 0)) {
    throw InputError(fmt::format("--refine-seconds: expected a finite number of seconds of at least 0, got {}",
                                 o.refine_seconds));
  }
  if (o.memory_limit_bytes < 0) throw InputError("--memory-limit: expected a size of at least 0");
}

}  // namespace

void CheckInputs(const sim::Scenario& sc, const PlanOptions& o) {
  CheckNumbers(o);
  const sim::TopologySpec& t = sc.topology;
  const int devices = t.devices();
  if (o.gpus < 1) throw InputError(fmt::format("--gpus: expected at least 1 device, got {}", o.gpus));
  if (o.gpus > devices) {
    throw InputError(fmt::format("--gpus {}: the topology of {} has {} devices{}", o.gpus, sc.path, devices,
                                 t.explicit_graph() || t.grouped()
                                     ? ""
                                     : fmt::format(" ({} nodes x {})", t.nodes, t.devices_per_node)));
  }
  // The job takes the first devices (node groups in the order listed): whole nodes beyond one.
  if (!t.explicit_graph() && o.gpus > t.DevicesOnNode(0) && t.NodeOf(o.gpus - 1) == t.NodeOf(o.gpus)) {
    throw InputError(fmt::format("--gpus {}: beyond one node the job takes whole nodes of {} devices{} (topology of {})",
                                 o.gpus, t.DevicesOnNode(t.NodeOf(o.gpus)),
                                 t.grouped() ? fmt::format(" (node {})", t.NodeOf(o.gpus)) : "", sc.path));
  }
  if (o.global_batch < 1) throw InputError(fmt::format("--global-batch: expected at least 1 sample, got {}", o.global_batch));
  // Each replica's share is m microbatches of b samples, each at most 2^24 (limits.h).
  const double most = static_cast<double>(o.gpus) * sim::kMaxMicrobatches * sim::kMaxMicrobatchSize;
  if (static_cast<double>(o.global_batch) > most) {
    throw InputError(fmt::format("--global-batch {}: more than {} devices can take ({:.3g}: at most 2^24 microbatches "
                                 "of at most 2^24 samples per replica)",
                                 o.global_batch, o.gpus, most));
  }
  if (ModelLayers(sc) == 0) {
    throw InputError(fmt::format("{}: plan splits the model's layers over each pipeline depth: it needs "
                                 "model.transformer, model.mlp or a profile (explicit per-rank costs are one depth's)",
                                 sc.path));
  }
  for (const int c : o.context_parallel) {
    if (o.gpus % c != 0) {
      throw InputError(fmt::format("--context-parallel {}: each C must divide the {} devices (--gpus)", c, o.gpus));
    }
    if (std::string why = sim::ContextParallelProblem(sc, c); !why.empty()) {
      throw InputError(fmt::format("--context-parallel {}: the model of {} cannot take it: {}", c, sc.path, why));
    }
  }
  // P x D x T over the devices each C leaves.
  const std::vector<int> contexts = ContextsTried(sc, o);
  if (!o.tensor_parallel.empty() && std::none_of(o.tensor_parallel.begin(), o.tensor_parallel.end(),
                                                 [&](int tp) { return SomeLayoutTakes(contexts, o.gpus, tp); })) {
    std::vector<int64_t> layouts;
    for (const int c : contexts) layouts.push_back(o.gpus / c);
    const std::string with = contexts.size() > 1 || contexts.front() > 1
                                 ? fmt::format(" with C = {}", fmt::join(contexts, " or "))
                                 : "";
    std::vector<int64_t> sizes;  // every T of every layout, ascending
    for (const int64_t layout : layouts) {
      for (const int64_t tp : Divisors(layout)) sizes.push_back(tp);
    }
    std::sort(sizes.begin(), sizes.end());
    sizes.erase(std::unique(sizes.begin(), sizes.end()), sizes.end());
    throw InputError(fmt::format("--tensor-parallel {}: divides no layout of {} devices (P x D x T = {}{}: T is one of {})",
                                 fmt::join(o.tensor_parallel, ","), o.gpus, fmt::join(layouts, " or "), with,
                                 fmt::join(sizes, ", ")));
  }
}

void KeepWithinBudget(const Space& space, std::vector<Candidate>* candidates, PlanResult* result) {
  const PlanOptions& o = space.options;
  const int64_t budget = o.max_plan_ops > 0 ? o.max_plan_ops : kDefaultMaxPlanOps;
  if (result->space_ops <= static_cast<double>(budget)) return;
  // The configurations with the most microbatches go first: they cost the most to simulate
  // (ops grow with m), and past a few microbatches per stage a pipeline's bubble shrinks little
  // while every op's smaller microbatch computes less efficiently.
  std::map<int, double> ops_by_microbatches;
  for (const Candidate& c : *candidates) ops_by_microbatches[c.config.microbatches] += c.ops;
  double kept_ops = 0;
  int most = 0;
  for (const auto& [m, ops] : ops_by_microbatches) {
    if (kept_ops + ops > static_cast<double>(budget)) break;
    kept_ops += ops;
    most = m;
  }
  const std::string whole = fmt::format("--global-batch {}: the plan's {} configurations are about {:.2g} ops to simulate",
                                        o.global_batch, candidates->size(), result->space_ops);
  if (most == 0) {
    const auto& [fewest, ops] = *ops_by_microbatches.begin();
    throw InputError(fmt::format("{}, and even those with the fewest microbatches ({}) about {:.2g}, above the limit of "
                                 "{:.2g} ops; raise it with --max-plan-ops N, or narrow the space (--schedules, "
                                 "--tensor-parallel, --context-parallel, a smaller --global-batch)",
                                 whole, fewest, ops, static_cast<double>(budget)));
  }
  const size_t before = candidates->size();
  std::erase_if(*candidates, [&](const Candidate& c) { return c.config.microbatches > most; });
  const int64_t left_out = static_cast<int64_t>(before - candidates->size());
  result->rejected[static_cast<int>(PlanReject::kPlanBudget)] += left_out;
  result->max_microbatches = most;
  result->notes.push_back(fmt::format("{}, above the limit of {:.2g} (--max-plan-ops): the {} with more than {} "
                                      "microbatches were left out, {} kept (about {:.2g} ops)",
                                      whole, static_cast<double>(budget), left_out, most, candidates->size(), kept_ops));
  if (o.note) o.note(result->notes.back());
}

}  // namespace stagecraft::harness::detail
