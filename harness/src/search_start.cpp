// The schedule search's starting points and how an order is judged (search_parts.h).
#include <algorithm>
#include <limits>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "search_parts.h"
#include "stagecraft/base/error.h"
#include "stagecraft/harness/predict.h"
#include "stagecraft/schedules/generators.h"
#include "stagecraft/schedules/lower.h"
#include "stagecraft/schedules/validate.h"
#include "stagecraft/schedules/weight_policy.h"
#include "stagecraft/sim/cost_models.h"

namespace stagecraft::harness::search_parts {

using schedules::GeneratorInfo;

double OrderMemory::Delta(const Op& op) const {
  const schedules::MemoryEffect& m = schedules::Info(op.kind).memory;  // F +act, B -act, I stash - act, W -stash
  return (m.w_stash == 0 ? 0 : m.w_stash * stash[op.stage]) + (m.activations == 0 ? 0 : m.activations * act[op.stage]);
}

double OrderMemory::Peak(const std::vector<Op>& ops) const {
  double now = 0, peak = 0;
  for (const Op& op : ops) peak = std::max(peak, now += Delta(op));
  return peak;
}

Judge::Judge(const sim::Scenario& sc, const sim::Topology& topo, int steps) : sc_(sc), topo_(topo), steps_(steps) {
  config_.record_memory = false;
  config_.rank_devices = sc.pipeline.RankDevices();
  config_.time_slice_ns = sim::TimeSliceNs(sc);
  config_.replica_devices = sc.pipeline.ReplicaDevices();  // the REDUCE_GRADs' rings, with replicas
}

std::optional<int64_t> Judge::StepNs(const Schedule& unlowered, const sim::CostTable& costs,
                                     schedules::RunRecord* record) const {
  Schedule lowered;
  try {
    lowered = schedules::Lower(unlowered, sc_.pipeline.p2p, sc_.pipeline.p2p_buffers);
  } catch (const InputError&) {  // an order that deadlocks cannot be lowered
    return std::nullopt;
  }
  if (!schedules::Validate(lowered).empty()) return std::nullopt;
  *record = sim::Simulate(lowered, costs, topo_, config_);
  return RunStepNs(*record, steps_);
}

OrderMemory MemoryOf(const sim::Scenario& sc, const Schedule& s, const sim::CostTable& costs,
                     const SearchMemoryLimit& limit, std::string* units) {
  const int stages = s.stages();
  OrderMemory m;
  const bool sized = HasSizes(costs);
  for (int j = 0; j < stages; ++j) {
    const sim::StageCost& c = costs.stages[static_cast<size_t>(j)];
    m.act.push_back(sized ? static_cast<double>(c.activation_bytes) : 1.0 / s.shape.chunks);
    m.stash.push_back(sized ? static_cast<double>(c.w_stash_bytes) : 0.5 / s.shape.chunks);
  }
  *units = sized ? "bytes" : "forwards' activations";
  SearchMemoryLimit use = limit;
  // The default: each rank's device memory.
  const bool device_memory = use.bytes == 0 && use.forwards == 0 && sized;
  m.limit.assign(static_cast<size_t>(s.ranks()), std::numeric_limits<double>::infinity());
  for (int r = 0; r < s.ranks(); ++r) {
    double rank_act = 0, fixed = 0;
    for (int chunk = 0; chunk < s.shape.chunks; ++chunk) {
      const int j = s.shape.StageOf(r, chunk);
      rank_act += m.act[static_cast<size_t>(j)];
      fixed += static_cast<double>(OrderIndependentBytes(sc, costs.stages[static_cast<size_t>(j)]));
    }
    if (use.forwards > 0) {
      m.limit[static_cast<size_t>(r)] = use.forwards * s.ranks() * rank_act;
    } else if (device_memory) {
      m.limit[static_cast<size_t>(r)] = static_cast<double>(sim::RankDeviceMemory(sc, r)) - fixed;
    } else if (use.bytes > 0) {
      if (!sized) {
        throw InputError(fmt::format("{}: a memory limit in bytes needs the model's sizes, and this scenario's costs "
                                     "give none: give it in forwards' activations (--memory-limit 2p)",
                                     sc.path));
      }
      m.limit[static_cast<size_t>(r)] = static_cast<double>(use.bytes) - fixed;
    }
  }
  return m;
}

namespace {

bool AnyOverlapped(const Schedule& s) {
  return std::any_of(s.ops.begin(), s.ops.end(), [](const std::vector<Op>& ops) {
    return std::any_of(ops.begin(), ops.end(), [](const Op& o) { return o.overlapped; });
  });
}

// The bound from the ops' times without their stash (sim/stash.h: a stash only lengthens an
// op), which no order of these stages goes below; the result's bound when lower.
void UpdateBound(const Candidate& c, const Schedule& lowered, const Judge& judge, int steps, SearchResult* result) {
  int bound_rank = 0;
  schedules::RunRecord unstashed;
  if (!c.costs.rank_stash.empty()) {
    sim::CostTable plain = c.costs;
    plain.rank_stash.clear();
    judge.StepNs(c.schedule, plain, &unstashed);
  }
  const int64_t bound = PlacementBoundNs(lowered, c.costs.rank_stash.empty() ? c.run : unstashed, steps, &bound_rank);
  if (result->bound_ns == 0 || bound < result->bound_ns) {
    result->bound_ns = bound;
    result->bound_rank = bound_rank;
    result->bound_placement = fmt::format(
        "{}, {} stages", c.schedule.shape.placement == schedules::Placement::kV ? "V" : "loop", c.schedule.stages());
  }
}

// One generator's start, judged; nothing (with the reason in result->starts) when it cannot
// start. `fits`: whether it is within the memory limit.
std::optional<Candidate> TryStart(const GeneratorInfo& info, const sim::Scenario& sc, const Judge& judge, int steps,
                                  const SearchMemoryLimit& limit, SearchResult* result, bool* fits) {
  const std::string name(info.name);
  schedules::GeneratorParams params = sim::GeneratorParamsFor(sc.pipeline, info);
  if (const std::string why = schedules::CheckParams(info, params); !why.empty()) {
    result->starts.push_back(fmt::format("{}: {}", name, why));
    return std::nullopt;
  }
  Candidate c;
  c.name = name;
  try {
    if (info.uses_costs) params.costs = std::make_shared<const schedules::StagePassCosts>(PassCostsFor(sc, params));
    c.schedule = schedules::Generate(name, params);
  } catch (const InputError& e) {
    result->starts.push_back(fmt::format("{}: {}", name, e.what()));
    return std::nullopt;
  }
  if (AnyOverlapped(c.schedule)) {
    result->starts.push_back(name + ": overlapped F&B pairs are kept as they are, not searched");
    return std::nullopt;
  }
  const Schedule lowered = schedules::Lower(c.schedule, sc.pipeline.p2p, sc.pipeline.p2p_buffers);
  c.costs = sim::BuildCosts(sc, lowered);
  // Judged at the mean op times: a profile's op-time variation is drawn per op position
  // (OpTimeFactor), and an order that moved its long ops onto short draws would win on noise.
  c.costs.op_time_cv = 0;
  c.memory = MemoryOf(sc, c.schedule, c.costs, limit, &c.units);
  *fits = true;
  for (int r = 0; r < c.schedule.ranks(); ++r) *fits &= c.memory.Fits(c.schedule.ops[static_cast<size_t>(r)], r);
  const std::optional<int64_t> ns = judge.StepNs(c.schedule, c.costs, &c.run);
  if (!ns) {
    result->starts.push_back(name + ": refused by the validator");
    return std::nullopt;
  }
  c.step_ns = *ns;
  UpdateBound(c, lowered, judge, steps, result);
  const std::string times = fmt::format("{:.3f} ms (one step alone {:.3f}, a long run {:.3f})", *ns * 1e-6,
                                        c.run.makespan_ns() * 1e-6, SteadyStepNs(c.run) * 1e-6);
  result->starts.push_back(fmt::format("{}: {}{}", name, times, *fits ? "" : ", over the memory limit"));
  return c;
}

// Why no start was kept, as one line.
InputError NoStart(const std::string& path, const SearchOptions& options, const SearchMemoryLimit& limit,
                   const SearchResult& result, const std::vector<std::string>& over_limit) {
  if (!options.from.empty() && result.starts.empty()) {
    const GeneratorInfo* info = schedules::FindGenerator(options.from);
    return InputError(fmt::format("--from {}: {}", options.from,
                                  info == nullptr ? "no such generator (" + schedules::GeneratorNames() + ")"
                                                  : "not a flush-policy schedule (the search keeps the training "
                                                    "as it is and changes the order)"));
  }
  // One line: the starts over the limit by name, the others (the generator or the validator
  // refused them) counted; DescribeSearch lists each start's reason when one fits.
  const size_t others = result.starts.size() - over_limit.size();
  return InputError(fmt::format("{}: search: no generator gives a schedule within the memory limit ({} per rank): {} "
                                "over it{}{}; raise the memory limit",
                                path, limit.Describe(), over_limit.size(),
                                over_limit.empty() ? "" : fmt::format(" ({})", fmt::join(over_limit, ", ")),
                                others == 0 ? "" : fmt::format(", {} that could not start", others)));
}

}  // namespace

Candidate BestStart(const sim::Scenario& sc, const std::string& path, const Judge& judge, int steps,
                    const SearchMemoryLimit& limit, const SearchOptions& options, SearchResult* result) {
  std::vector<std::string> over_limit;  // the starts that ran but do not fit, for the error
  std::optional<Candidate> best;
  for (const GeneratorInfo& info : schedules::Generators()) {
    if (!schedules::TrainsAsSequential(info.weights)) continue;  // another training, not another order
    if (!info.in_all) continue;                                  // another kind of job (spilled)
    if (!options.from.empty() && info.name != options.from) continue;
    bool fits = false;
    std::optional<Candidate> c = TryStart(info, sc, judge, steps, limit, result, &fits);
    if (!c) continue;
    if (!fits) {
      over_limit.push_back(c->name);
      continue;
    }
    if (!best || c->step_ns < best->step_ns ||
        (c->step_ns == best->step_ns && c->run.makespan_ns() < best->run.makespan_ns())) {
      best = std::move(c);
    }
  }
  if (!best) throw NoStart(path, options, limit, *result, over_limit);
  return std::move(*best);
}

}  // namespace stagecraft::harness::search_parts
