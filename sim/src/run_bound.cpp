// The bound on a run's simulated time (see run_bound.h): op by op for a built schedule, and from
// the counts for a scenario's schedules before they are built.
#include "stagecraft/sim/run_bound.h"

#include <fmt/format.h>

#include <algorithm>
#include <optional>
#include <string>

#include "cost_checks.h"
#include "stagecraft/base/error.h"
#include "stagecraft/schedules/budget.h"
#include "stagecraft/schedules/edges.h"
#include "stagecraft/schedules/generators.h"
#include "stagecraft/schedules/weight_policy.h"
#include "stagecraft/sim/compute_streams.h"
#include "stagecraft/sim/copy_streams.h"
#include "stagecraft/scenario/limits.h"

namespace stagecraft::sim {
namespace {

using schedules::Edge;
using schedules::Flow;

constexpr double kNsPerSecond = 1e9;

std::string Prefix(const std::string& path) { return path.empty() ? "" : path + ": "; }

// One transfer alone: the measured fit's latency + bytes / bandwidth, else the route's latency
// (+ the cost table's p2p latency) + bytes / the route's slowest link. Past kMaxOpNs, an
// InputError naming the stages, the ranks and where the time comes from.
double TransferAloneNs(const CostTable& costs, const Topology& topology, const std::vector<int>& rank_devices,
                       const Edge& edge, const std::string& path) {
  const auto device = [&](int rank) { return rank_devices.empty() ? rank : rank_devices[rank]; };
  const double bytes = static_cast<double>(costs.stages[edge.from_stage].send_bytes);
  double latency_ns = 0, rate = 0;
  std::string via;
  if (costs.p2p) {
    latency_ns = static_cast<double>(costs.p2p->latency_ns);
    rate = costs.p2p->DataBytesPerS();
    via = "model.profile's p2p fit";
  } else {
    const int from = device(edge.from_rank), to = device(edge.to_rank);
    latency_ns = static_cast<double>(topology.RouteLatencyNs(from, to) + costs.p2p_latency_ns);
    rate = topology.RouteBandwidth(from, to);
    via = "the slowest link of its route";
  }
  const double ns = latency_ns + (rate > 0 ? bytes * kNsPerSecond / rate : 0.0);
  if (ns > static_cast<double>(kMaxOpNs)) {
    throw InputError(fmt::format(
        "{}a transfer of {} from stage {} (rank {}) to stage {} (rank {}) would take {} s ({:.3g} bytes, stage {}'s "
        "send_bytes, at {:.3g} B/s over {}, after {:.3g} s of latency), above the limit of 1 h per op",
        Prefix(path), edge.flow == Flow::kActivation ? "activations" : "gradients", edge.from_stage, edge.from_rank,
        edge.to_stage, edge.to_rank, detail::SecondsAbove(ns, static_cast<double>(kMaxOpNs)), bytes, edge.from_stage,
        rate, via, latency_ns / kNsPerSecond));
  }
  return ns;
}

// A stage's ops of one unit at their mean: F and the larger of B and I + W.
double UnitNs(const StageCost& c) {
  return static_cast<double>(c.forward_ns + std::max(c.backward_input_ns + c.backward_weight_ns, c.FullBackwardNs()));
}

double MaxOverheadNs(const CostTable& costs, int ranks) {
  int64_t most = costs.op_overhead_ns;
  for (int r = 0; r < ranks; ++r) most = std::max(most, costs.OverheadOf(r));
  return static_cast<double>(most);
}

std::string Seconds(double ns) { return fmt::format("{:.2g} s", ns / kNsPerSecond); }
std::string SecondsOverRun(double ns) { return detail::SecondsAbove(ns, static_cast<double>(kMaxRunNs)) + " s"; }

}  // namespace

CountBound BoundFromCounts(const schedules::GeneratorInfo& info, const schedules::GeneratorParams& p,
                           const CostTable& costs, const Topology& topology, const std::string& path,
                           const std::vector<int>& rank_devices) {
  const schedules::Shape shape{p.ranks, p.chunks, info.placement};
  const double units_per_stage = static_cast<double>(p.microbatches) * p.steps;
  const double steps_per_stage =
      static_cast<double>(p.steps) * static_cast<double>(schedules::UpdatesPerStep(info.weights, p.microbatches));
  CountBound sum;
  for (int s = 0; s < shape.stages(); ++s) {
    const StageCost& c = costs.stages[s];
    const double unit_ns = UnitNs(c);
    sum.total_ns += unit_ns * units_per_stage + static_cast<double>(c.step_ns + c.version_copy_ns) * steps_per_stage;
    if (unit_ns > sum.longest_unit_ns) sum.longest_unit_ns = unit_ns, sum.longest_stage = s;
    if (s + 1 == shape.stages() || shape.RankOf(s) == shape.RankOf(s + 1)) continue;
    // The activation s -> s + 1 and the gradient s + 1 -> s of every unit.
    for (const Flow flow : {Flow::kActivation, Flow::kGradient}) {
      const int from = flow == Flow::kActivation ? s : s + 1;
      const std::optional<Edge> edge = schedules::EdgeFrom(shape, flow, from, 0, 0);
      sum.total_ns += TransferAloneNs(costs, topology, rank_devices, *edge, path) * units_per_stage;
    }
  }
  sum.total_ns += MaxOverheadNs(costs, p.ranks) * schedules::EstimateSize(info, p).ops;
  return sum;
}

RunBound BoundRun(const schedules::Schedule& schedule, const CostTable& costs, const Topology& topology,
                  const std::vector<int>& rank_devices) {
  RunBound bound;
  for (int r = 0; r < schedule.ranks(); ++r) {
    const double overhead_ns = static_cast<double>(costs.OverheadOf(r));
    for (size_t i = 0; i < schedule.ops[r].size(); ++i) {
      const schedules::Op& op = schedule.ops[r][i];
      bound.compute_ns += overhead_ns;
      if (schedules::IsComm(op.kind)) {
        if (!schedules::IsSend(op.kind)) continue;
        if (const std::optional<Edge> edge = schedules::CommEdge(schedule.shape, op)) {
          bound.transfer_ns += TransferAloneNs(costs, topology, rank_devices, *edge, schedule.name);
        }
        continue;
      }
      if (schedules::IsCopy(op.kind)) {
        const int device = rank_devices.empty() ? r : rank_devices[static_cast<size_t>(r)];
        bound.transfer_ns += CopyAloneNs(topology, device, CopyBytes(costs.stages[op.stage], op.tensor));
        continue;
      }
      // A STEP counted as if it copied its old version first; the op's own time factor, and the
      // most its stash can add (StashFactor is at most 2).
      double factor =
          costs.op_time_cv > 0 ? OpTimeFactor(costs.op_time_cv, costs.op_time_seed, r, static_cast<int>(i)) : 1.0;
      if (!costs.rank_stash.empty()) factor *= 2;
      bound.compute_ns += static_cast<double>(OpDurationNs(costs.stages[op.stage], op.kind, false)) * factor;
    }
  }
  return bound;
}

void CheckRunBound(const schedules::Schedule& schedule, const CostTable& costs, const Topology& topology,
                   const std::vector<int>& rank_devices, double collective_ns) {
  RunBound bound = BoundRun(schedule, costs, topology, rank_devices);
  bound.transfer_ns += collective_ns;
  if (bound.total_ns() <= static_cast<double>(kMaxRunNs)) return;
  throw InputError(fmt::format(
      "{} could run for up to {} of simulated time ({} over {} take {} on the streams, {} microbatches x {}; "
      "transfers {} alone), above the limit of 1 year ({}); fewer microbatches or steps, or shorter ops, would fit",
      schedule.name, SecondsOverRun(bound.total_ns()), detail::Count(static_cast<int64_t>(schedule.OpCount()), "op"),
      detail::Count(schedule.ranks(), "rank"), Seconds(bound.compute_ns), schedule.microbatches,
      detail::Count(schedule.steps, "step"), Seconds(bound.transfer_ns),
      Seconds(static_cast<double>(kMaxRunNs))));
}

}  // namespace stagecraft::sim
