// The copies of pipeline.offload in a job's schedules (see job_copies.h).
#include "job_copies.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include <fmt/format.h>

#include "stagecraft/base/check.h"
#include "stagecraft/base/error.h"
#include "stagecraft/harness/predict.h"
#include "stagecraft/schedules/offload.h"
#include "stagecraft/schedules/validate.h"
#include "stagecraft/sim/cost_models.h"
#include "stagecraft/sim/topology.h"

namespace stagecraft::harness::detail {
namespace {

using schedules::Schedule;

// `s` with every stage's weights and optimizer state spilled to the host (schedules/offload.h).
Schedule Spilled(const Schedule& s, bool double_buffer) {
  Schedule spilled = schedules::PlaceWeightSpill(s, {.double_buffer = double_buffer});
  const auto diags = schedules::Validate(spilled);
  if (!diags.empty()) {
    throw InputError(fmt::format("pipeline.offload.weights: spill cannot be placed on {}: {}", s.name,
                                 diags.front().message));
  }
  return spilled;
}

// How many compute ops ahead of its B each stage's reloads go (PipeOffload times them): as many of
// the stage's ops (the mean of its F and its backward) as a copy of a stash takes on its share of
// the node's host link (the link over the node's copying ranks, at most its own port), at least one. Empty
// without a scenario to price them (one op ahead).
std::vector<int> ReloadLookaheads(const sim::Scenario* sc, const Schedule& s) {
  if (sc == nullptr || !sc->topology.host.stated() || sc->topology.host.bandwidth_bytes_per_s <= 0) return {};
  const sim::CostTable costs = sim::BuildCosts(*sc, s);
  const int sharing = std::max(1, std::min(s.ranks(), sc->topology.explicit_graph() ? 1 : sc->topology.DevicesOnNode(0)));
  std::vector<int> leads;
  for (const sim::StageCost& c : costs.stages) {
    const double copy_ns = sc->topology.host.CopyNs(c.activation_bytes, sharing);
    const double op_ns = std::max(1.0, static_cast<double>(c.forward_ns + c.FullBackwardNs()) / 2);
    leads.push_back(std::max(1, static_cast<int>(std::ceil(copy_ns / op_ns))));
  }
  return leads;
}

// `s` with `fraction` of each stage's stashed activations offloaded, their reloads `lookaheads`
// compute ops ahead (ReloadLookaheads).
Schedule Offloaded(const Schedule& s, double fraction, const std::vector<int>& lookaheads) {
  if (fraction <= 0) return s;
  schedules::ActivationOffload offload;
  offload.fraction.assign(static_cast<size_t>(s.stages()), std::min(1.0, fraction));
  offload.stage_lookahead = lookaheads;
  Schedule placed = schedules::PlaceActivationOffloads(s, offload);
  const auto diags = schedules::Validate(placed);
  SC_CHECK(diags.empty(), diags.empty() ? "" : diags.front().message);
  return placed;
}

// How much more than the step time without copies a step with them may take and still count as
// hiding them: the simulator's own rounding, not a trade of time for memory.
constexpr double kHiddenSlack = 0.005;

// pipeline.offload.activations: auto: the most microbatches' stashes per stage (k of m, on every
// stage; k / m of each stage's stage-microbatches) whose copies keep the simulated step time
// within kHiddenSlack of the run without them, in the time they hide in, and fit in host memory.
// Bisection over k: offloading more never makes the step shorter.
Schedule AutoOffload(const sim::Scenario& sc, const Schedule& plain, const std::atomic<bool>* cancel) {
  const sim::Topology topo(sc.topology);
  const double base = Predict(sc, topo, plain, cancel).metrics.makespan_ms;
  const int m = std::max(1, plain.microbatches);
  // k / m, a hair up so that floor(k / m x m x steps) is k x steps in floating point.
  const auto fraction = [&](int k) { return (k + 1e-9) / m; };
  const std::vector<int> lookaheads = ReloadLookaheads(&sc, plain);  // the same for every k
  const auto hidden = [&](int k) {
    try {
      return Predict(sc, topo, Offloaded(plain, fraction(k), lookaheads), cancel).metrics.makespan_ms <= base * (1 + kHiddenSlack);
    } catch (const InputError&) {
      return false;  // more than the host holds, or copies this schedule cannot take
    }
  };
  if (hidden(m)) return Offloaded(plain, 1, lookaheads);
  int lo = 0, hi = m;  // lo's copies hide, hi's do not
  while (hi - lo > 1) {
    const int mid = (lo + hi) / 2;
    (hidden(mid) ? lo : hi) = mid;
  }
  return lo == 0 ? plain : Offloaded(plain, fraction(lo), lookaheads);
}

}  // namespace

Schedule WithCopies(const sim::PipelineSpec& p, Schedule s, const sim::Scenario* costs_from,
                    const std::atomic<bool>* cancel) {
  // Spilled execution spills whatever pipeline.offload.weights says: that is what it is.
  if (p.offload.weights == sim::WeightsOffload::kSpill || s.name == "spilled") s = Spilled(s, p.offload.double_buffer);
  if (!p.offload.activations_auto) {
    return Offloaded(s, p.offload.activations,
                     p.offload.activations > 0 ? ReloadLookaheads(costs_from, s) : std::vector<int>{});
  }
  if (costs_from == nullptr) {
    throw InputError("pipeline.offload.activations: auto is decided by simulating the scenario, which this "
                     "command does not have");
  }
  return AutoOffload(*costs_from, s, cancel);
}

}  // namespace stagecraft::harness::detail
