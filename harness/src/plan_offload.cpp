// Plan's last resort when nothing fits: the fastest configurations again with copies to the host
// (see plan_space.h TryOffload; docs/plan.md, "When nothing fits: offload").
#include <algorithm>
#include <chrono>
#include <optional>
#include <vector>

#include <fmt/format.h>

#include "plan_board.h"
#include "plan_space.h"
#include "stagecraft/base/error.h"
#include "stagecraft/harness/predict.h"

namespace stagecraft::harness::detail {
namespace {

using Clock = std::chrono::steady_clock;

// How many of the fastest configurations (by their time floors) plan simulates again with every
// stash offloaded, when none fits without.
constexpr size_t kOffloadTries = 16;

// The first kOffloadTries of `sorted` (Plan sorts them by their time floors, lowest first), each
// with `with` applied to its configuration, simulated whatever their memory floors said (those
// count everything on the device); what fits goes into `result`. Returns how many fit.
template <class With>
int TryCopies(const Space& space, const std::vector<Candidate>& candidates, With with, PlanResult* result) {
  std::vector<std::optional<PlanEntry>> tried(candidates.size());
  ParallelFor(candidates.size(), space.max_threads, [&](size_t i) {
    PlanConfig config = candidates[i].config;
    with(&config);
    const auto start = Clock::now();
    try {
      const sim::Scenario sc = ScenarioFor(space.base, config, space.options);
      std::vector<schedules::Schedule> built = ScenarioSchedules(sc, {config.schedule}, space.options.cancel);
      const Prediction p = Predict(sc, space.topology, std::move(built.front()));
      tried[i] = EntryOf(space, config, p, std::chrono::duration<double>(Clock::now() - start).count());
    } catch (const InputError&) {
      // A shape the schedule does not take, more than the host holds, or no step on the host.
    }
  });
  int kept = 0;
  for (std::optional<PlanEntry>& e : tried) {
    if (!e || !e->fits) continue;
    ++kept;
    result->entries.push_back(std::move(*e));
  }
  return kept;
}

}  // namespace

// When nothing fits and the scenario has a host (topology.host) and copies nothing itself: the
// kOffloadTries fastest configurations with every stash copied to the host
// (pipeline.offload.activations: 1), and when none of those fits either and the host can take the
// step, with the optimizer on the host too (pipeline.offload.optimizer: host). What fits is kept,
// with a note of what the copies bought. Returns how many it tried.
size_t TryOffload(const Space& space, const std::vector<Candidate>& sorted, PlanResult* result) {
  const sim::Scenario& base = space.base;
  if (!base.topology.host.stated() || base.pipeline.offload.any()) return 0;
  const std::vector<Candidate> candidates(sorted.begin(),
                                          sorted.begin() + static_cast<std::ptrdiff_t>(std::min(sorted.size(), kOffloadTries)));
  if (candidates.empty()) return 0;
  const int stashes = TryCopies(space, candidates, [](PlanConfig* c) { c->offload_activations = 1; }, result);
  if (stashes > 0) {
    result->notes.push_back(fmt::format("nothing fits with every stash on the device: {} of the {} fastest "
                                        "configurations fit with every stash offloaded to the host "
                                        "(pipeline.offload.activations: 1)",
                                        stashes, candidates.size()));
    return candidates.size();
  }
  const bool step_on_host = base.topology.HostRunsTheStep();
  const int optimizer = step_on_host ? TryCopies(space, candidates,
                                                 [](PlanConfig* c) {
                                                   c->offload_activations = 1;
                                                   c->optimizer_on_host = true;
                                                 },
                                                 result)
                                     : 0;
  result->notes.push_back(
      optimizer > 0
          ? fmt::format("nothing fits with every stash on the device, nor with every stash offloaded to the host: {} of "
                        "the {} fastest configurations fit with the optimizer on the host too "
                        "(pipeline.offload.optimizer: host)",
                        optimizer, candidates.size())
          : fmt::format("nothing fits with every stash on the device, nor with every stash offloaded to the host{} for "
                        "the {} fastest configurations",
                        step_on_host ? " and the optimizer there" : "", candidates.size()));
  return candidates.size();
}

}  // namespace stagecraft::harness::detail
