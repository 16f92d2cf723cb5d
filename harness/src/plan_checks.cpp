// The plan's options checked against their ranges and the scenario (plan_space.h). Needs sim
// and schedules only, as plan_space.cpp.
#include <algorithm>
#include <cmath>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "plan_space.h"
#include "stagecraft/base/error.h"
#include "stagecraft/scenario/limits.h"

namespace stagecraft::harness::detail {

namespace {

// The options' numbers, each against its range (the flags named, as the command takes them).
void CheckNumbers(const PlanOptions& o) {
  for (const int tp : o.tensor_parallel) {
    if (tp < 1 || tp > sim::kMaxTensorParallel) {
      throw InputError(fmt::format("--tensor-parallel: expected sizes from 1 to {}, got {}", sim::kMaxTensorParallel, tp));
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
  if (const int c = sc.pipeline.context_parallel; o.gpus % c != 0) {
    throw InputError(fmt::format("--gpus {}: pipeline.context_parallel {} of {} stays as stated in the plan and must "
                                 "divide the devices",
                                 o.gpus, c, sc.path));
  }
  const int layout = o.gpus / sc.pipeline.context_parallel;  // P x D x T
  if (!o.tensor_parallel.empty() && std::none_of(o.tensor_parallel.begin(), o.tensor_parallel.end(),
                                                 [&](int tp) { return layout % tp == 0; })) {
    throw InputError(fmt::format("--tensor-parallel {}: divides no layout of {} devices (P x D x T = {}: T is one of {})",
                                 fmt::join(o.tensor_parallel, ","), o.gpus, layout, fmt::join(Divisors(layout), ", ")));
  }
}

}  // namespace stagecraft::harness::detail
