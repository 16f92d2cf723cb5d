// The derived limits of a scenario (scenario_checks.h), before any schedule is built: the cost
// table of every shape its generators run, each derived time and size within its limit, and the
// whole run's simulated time bounded from the schedules' counts (run_bound.h).
#include <fmt/format.h>

#include <map>
#include <tuple>

#include "cost_checks.h"
#include "scenario_limits.h"
#include "stagecraft/sim/cost_models.h"
#include "stagecraft/scenario/limits.h"
#include "stagecraft/sim/run_bound.h"

namespace stagecraft::sim::detail {
namespace {

std::string Seconds(double ns) { return fmt::format("{:.2g} s", ns / 1e9); }

// Throws InputError naming the scenario, the schedule, its counts and its longest op when the
// bound of a generator's schedule is above kMaxRunNs.
void CheckBound(const Scenario& sc, const schedules::GeneratorInfo& info, const schedules::GeneratorParams& params,
                const CountBound& bound) {
  if (bound.total_ns <= static_cast<double>(kMaxRunNs)) return;
  throw InputError(fmt::format(
      "{}{}{} could run for up to {} s of simulated time ({} microbatches x {} over {}; one microbatch's forward and "
      "backward take {} on stage {}), above the limit of 1 year ({}); fewer microbatches or steps, or shorter ops, "
      "would fit",
      sc.path, sc.path.empty() ? "" : ": ", info.name, SecondsAbove(bound.total_ns, static_cast<double>(kMaxRunNs)),
      params.microbatches, Count(params.steps, "step"), Count(int64_t{params.ranks} * params.chunks, "stage"),
      Seconds(bound.longest_unit_ns), bound.longest_stage, Seconds(static_cast<double>(kMaxRunNs))));
}

}  // namespace

void CheckDerivedLimits(const Scenario& sc, const Topology& topology, std::vector<ScenarioProblem>* out) {
  // The generators of one scenario share a few shapes.
  std::map<std::tuple<int, int, schedules::Placement>, CostTable> costs_by_shape;
  try {
    for (const auto& [info, params] : RunGenerators(sc.pipeline)) {
      const schedules::Shape shape{params.ranks, params.chunks, info->placement};
      auto it = costs_by_shape.find({shape.ranks, shape.chunks, shape.placement});
      if (it == costs_by_shape.end()) {
        it = costs_by_shape.emplace(std::tuple{shape.ranks, shape.chunks, shape.placement},
                                    BuildCosts(sc, CostQuery{shape})).first;
      }
      CheckBound(sc, *info, params,
                 BoundFromCounts(*info, params, it->second, topology, sc.path, sc.pipeline.RankDevices()));
    }
  } catch (const InputError& e) {
    out->push_back({"", e.what()});
  }
}

}  // namespace stagecraft::sim::detail
