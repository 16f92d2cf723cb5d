// The plan's search (see plan.h): the closed-form floors over shared cost tables, the simulations
// on a pool of threads in order of their floors, and the refinement by `auto`; the space it
// searches is plan_space.cpp's.
#include "stagecraft/harness/plan.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <exception>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <system_error>
#include <thread>
#include <tuple>
#include <utility>

#include <fmt/format.h>

#include "plan_board.h"
#include "plan_bounds.h"
#include "plan_space.h"
#include "stagecraft/base/check.h"
#include "stagecraft/base/error.h"
#include "stagecraft/base/format.h"
#include "stagecraft/schedules/generators.h"
#include "stagecraft/schedules/lower.h"
#include "stagecraft/sim/cost_models.h"
#include "stagecraft/scenario/limits.h"
#include "stagecraft/sim/topology.h"
#include "stagecraft/scenario/units.h"

namespace stagecraft::harness {

using schedules::GeneratorInfo;
using detail::Candidate;
using detail::CostKey;
using detail::Board;
using detail::ParallelFor;
using detail::Space;
using Clock = std::chrono::steady_clock;

namespace {

constexpr std::string_view kRejectNames[kPlanRejectKinds] = {
    "topology", "indivisible batch", "schedule shape", "over --max-ops", "out of memory", "pruned by the bound",
    "over --max-plan-ops"};

// One cost table and its floors, shared by every configuration with its key.
struct Facts {
  sim::CostTable costs;
  detail::StageFloors floors;
  int64_t memory_floor = 0;
  std::string error;  // the cost model refused the shape
  // The all-reduces' floors, added by the first configuration that needs them.
  std::unique_ptr<std::once_flag> reduce_once = std::make_unique<std::once_flag>();
};

}  // namespace

std::string_view Name(PlanReject reject) { return kRejectNames[static_cast<int>(reject)]; }

std::string DescribeConfig(const PlanConfig& c) {
  const std::string placement =
      c.placement.empty() ? "" : fmt::format(" placed {}", fmt::join(detail::AxisNames(c.placement), ","));
  return fmt::format("{} P{} D{} T{}{}{}{} b{} m{}{} {} zero-{} {}{}{}{}", c.schedule, c.ranks, c.data_parallel,
                     c.tensor_parallel, c.sequence_parallel ? "(sp)" : "",
                     c.context_parallel > 1 ? fmt::format(" C{}", c.context_parallel) : "",
                     c.expert_parallel > 1 ? fmt::format(" E{}", c.expert_parallel) : "", c.microbatch_size, c.microbatches,
                     c.chunks > 1 ? fmt::format(" v{}", c.chunks) : "", RecomputeLabel(c), c.zero,
                     sim::Name(c.partition),
                     c.offload_activations > 0 ? fmt::format(" offload {:g}", c.offload_activations) : "",
                     c.optimizer_on_host ? " optimizer-host" : "", placement);
}


PlanEntry detail::EntryOf(const Space& space, const PlanConfig& c, const Prediction& p, double seconds) {
  PlanEntry e;
  e.config = c;
  e.metrics = p.metrics;
  e.worst_rank = p.metrics.WorstMemoryRank();
  e.peak_bytes = p.metrics.ranks_detail[e.worst_rank].peak_memory_bytes;
  e.memory = MemoryTermsOf(p, e.worst_rank);
  e.fits = !p.metrics.AnyOom() && e.peak_bytes <= space.limit_bytes;
  // The split is of the whole run; per step as step_time_ms is (makespan / steps).
  const double per_step = 1.0 / (static_cast<double>(p.metrics.ranks_detail.size()) * std::max(1, p.metrics.steps));
  for (const schedules::RankMetrics& r : p.metrics.ranks_detail) {
    const double parts[7] = {r.compute_ms,  r.wait_ms, r.transfer_ms,    r.collective_ms,
                             r.overhead_ms, r.idle_ms, r.offload_wait_ms};
    for (int k = 0; k < 7; ++k) e.mean_step_split_ms[k] += parts[k] * per_step;
  }
  e.seconds = seconds;
  return e;
}

namespace {

// The cost table of one key, with its floors; a cost model that refuses the shape leaves why.
Facts BuildFacts(const Space& space, const CostKey& key, const PlanConfig& example) {
  Facts f;
  try {
    const sim::Scenario sc = ScenarioFor(space.base, example, space.options);
    sim::CostQuery query;
    query.shape = schedules::Shape{key.ranks, key.chunks, key.placement};
    query.per_microbatch_updates = key.per_microbatch_updates;
    f.costs = sim::BuildCosts(sc, query);
    f.floors = detail::FloorsOf(sc, space.topology, f.costs, query.shape);
    f.memory_floor = detail::MemoryFloor(f.floors);
  } catch (const InputError& e) {
    f.error = e.what();
  }
  return f;
}

// One candidate through the order's floors and, when it could still place, the simulator.
void Evaluate(const Space& space, const Candidate& cand, Facts& facts, Board* board) {
  if (!board->CouldMatter(cand.floor_ns, facts.memory_floor)) return board->Reject(PlanReject::kBound);
  const auto start = Clock::now();
  const sim::Scenario sc = ScenarioFor(space.base, cand.config, space.options);
  schedules::GeneratorParams params = sim::GeneratorParamsFor(sc.pipeline, *cand.info);
  schedules::Schedule order;
  try {
    if (cand.info->uses_costs) {  // the key's table is a ZB-H1's of the shape (loop placement, one stage per rank)
      params.costs = std::make_shared<const schedules::StagePassCosts>(PassCostsFor(sc, facts.costs, space.topology));
    }
    order = schedules::Generate(cand.info->name, params);
  } catch (const InputError&) {
    return board->Reject(PlanReject::kShape);  // a cost-aware generator that finds no order
  }
  const int64_t memory_floor = detail::OrderMemoryFloor(facts.floors, order);
  if (memory_floor > space.limit_bytes) return board->Reject(PlanReject::kMemory);
  std::call_once(*facts.reduce_once, [&] { detail::AddReduceFloors(sc, space.topology, facts.costs, &facts.floors); });
  const int64_t time_floor = detail::OrderTimeFloorNs(facts.floors, order);
  if (time_floor < 0) return board->Reject(PlanReject::kShape);
  if (!board->CouldMatter(time_floor, memory_floor)) return board->Reject(PlanReject::kBound);
  try {
    order = schedules::Lower(order, sc.pipeline.p2p, sc.pipeline.p2p_buffers);
  } catch (const InputError&) {
    return board->Reject(PlanReject::kShape);  // an order that deadlocks
  }
  Prediction p;
  try {
    p = Predict(sc, space.topology, std::move(order), facts.costs);
  } catch (const InputError&) {
    return board->Reject(PlanReject::kTooLarge);  // a run past the simulator's limits (an op over 1 h, a year)
  }
  // The floors are bounds on the simulator's own numbers: a run below one is a bug in them.
  SC_CHECK(p.metrics.makespan_ns >= std::max(time_floor, cand.floor_ns),
           fmt::format("{}: simulated {} ns, below its floors of {} ns (order) and {} ns (closed form)",
                       DescribeConfig(cand.config), p.metrics.makespan_ns, time_floor, cand.floor_ns));
  const int worst = p.metrics.WorstMemoryRank();
  SC_CHECK(p.metrics.ranks_detail[worst].peak_memory_bytes >= memory_floor,
           fmt::format("{}: simulated peak {} bytes, below its floor of {}", DescribeConfig(cand.config),
                       p.metrics.ranks_detail[worst].peak_memory_bytes, memory_floor));
  PlanEntry entry = detail::EntryOf(space, cand.config, p, std::chrono::duration<double>(Clock::now() - start).count());
  entry.bound_ms = static_cast<double>(time_floor) * 1e-6 / sc.pipeline.steps;
  board->Add(std::move(entry));
}

// The searched order for the leading layouts: `auto` in place of the leader's generator, as
// `simulate` runs it (the search inside ScenarioSchedules), where its moves fit the time given.
void Refine(const Space& space, PlanResult* result) {
  const PlanOptions& o = space.options;
  const bool asked = o.schedules.empty() || std::find(o.schedules.begin(), o.schedules.end(),
                                                      std::string(sim::kSearchedSchedule)) != o.schedules.end();
  if (o.refine <= 0 || !asked) return;
  std::vector<PlanConfig> leaders;
  std::vector<double> estimates;
  const int64_t moves = o.search_evaluations > 0 ? o.search_evaluations : space.base.pipeline.search_evaluations;
  std::vector<std::pair<PlanConfig, double>> searched_from;  // each leader and its step in ms
  std::vector<PlanConfig> seen;  // the leading layouts (with auto in place of their schedule)
  for (const PlanEntry& e : result->entries) {
    if (static_cast<int>(seen.size()) == o.refine || !e.fits) break;
    PlanConfig c = e.config;
    c.schedule = std::string(sim::kSearchedSchedule);
    if (std::find(seen.begin(), seen.end(), c) != seen.end()) continue;
    seen.push_back(c);
    // The search simulates each generator once and then every move.
    const double estimate = e.seconds * static_cast<double>(moves + static_cast<int64_t>(schedules::Generators().size()));
    if (estimate > o.refine_seconds) {
      result->notes.push_back(fmt::format("auto not searched for {}: about {:.0f} s for {} moves (over {:g} s)",
                                          DescribeConfig(e.config), estimate, moves, o.refine_seconds));
      continue;
    }
    leaders.push_back(c);
    searched_from.emplace_back(e.config, e.metrics.step_time_ms);
  }
  std::vector<std::optional<PlanEntry>> refined(leaders.size());
  std::vector<std::string> why(leaders.size());
  ParallelFor(leaders.size(), space.max_threads, [&](size_t i) {
    const auto start = Clock::now();
    try {
      const sim::Scenario sc = ScenarioFor(space.base, leaders[i], o);
      std::vector<schedules::Schedule> searched =
          ScenarioSchedules(sc, {std::string(sim::kSearchedSchedule)}, o.cancel);
      const Prediction p = Predict(sc, space.topology, std::move(searched.front()));
      refined[i] = detail::EntryOf(space, leaders[i], p, std::chrono::duration<double>(Clock::now() - start).count());
    } catch (const InputError& e) {
      why[i] = e.what();
    }
  });
  for (size_t i = 0; i < leaders.size(); ++i) {
    if (!refined[i]) {
      result->notes.push_back(fmt::format("auto not found on the layout of {}: {}", DescribeConfig(searched_from[i].first),
                                          why[i]));
      continue;
    }
    ++result->enumerated;
    ++result->simulated;
    if (refined[i]->metrics.step_time_ms >= searched_from[i].second) {  // the same run under another name
      result->notes.push_back(fmt::format("auto searched on the layout of {} ({} moves): no shorter order than its {:.3f} ms",
                                          DescribeConfig(searched_from[i].first), moves, searched_from[i].second));
      continue;
    }
    if (!refined[i]->fits) {
      ++result->rejected[static_cast<int>(PlanReject::kMemory)];
      ++result->memory_rejected_simulated;
    }
    result->notes.push_back(fmt::format("auto searched on the layout of {} ({} moves): {:.3f} ms per step, against {:.3f}",
                                        DescribeConfig(searched_from[i].first), moves,
                                        refined[i]->metrics.step_time_ms, searched_from[i].second));
    result->entries.push_back(std::move(*refined[i]));
  }
}

// Fitting before not, then fastest first; on a tie the smaller peak, then the description.
void Rank(PlanResult* result) {
  std::vector<std::pair<std::string, PlanEntry>> keyed;
  for (PlanEntry& e : result->entries) keyed.emplace_back(DescribeConfig(e.config), std::move(e));
  std::sort(keyed.begin(), keyed.end(), [](const auto& a, const auto& b) {
    const PlanEntry& x = a.second;
    const PlanEntry& y = b.second;
    return std::tuple(!x.fits, x.metrics.makespan_ns, x.peak_bytes, a.first) <
           std::tuple(!y.fits, y.metrics.makespan_ns, y.peak_bytes, b.first);
  });
  result->entries.clear();
  result->pareto.clear();
  for (auto& [name, e] : keyed) result->entries.push_back(std::move(e));
  // The Pareto front: by peak memory, each fitting entry faster than every one that needs less.
  std::vector<int> order;
  for (int i = 0; i < static_cast<int>(result->entries.size()); ++i) {
    if (result->entries[i].fits) order.push_back(i);
  }
  std::stable_sort(order.begin(), order.end(), [&](int a, int b) {
    return result->entries[a].peak_bytes < result->entries[b].peak_bytes;
  });
  int64_t fastest = std::numeric_limits<int64_t>::max();
  for (const int i : order) {
    if (result->entries[i].metrics.makespan_ns < fastest) {
      result->pareto.push_back(i);
      fastest = result->entries[i].metrics.makespan_ns;
    }
  }
}

// Why no configuration was kept: when none was tried (every layout refused, or every
// configuration refused before any memory was counted) the reasons, not the memory; else the
// memory limit with every count.
std::string NothingFits(const sim::Scenario& sc, const PlanOptions& o, const PlanResult& r) {
  std::string why;
  for (int k = 0; k < kPlanRejectKinds; ++k) {
    if (r.layouts_rejected[k] > 0) why += fmt::format(", {} layouts: {}", r.layouts_rejected[k], kRejectNames[k]);
  }
  for (int k = 0; k < kPlanRejectKinds; ++k) {
    if (r.rejected[k] > 0) why += fmt::format(", {} configurations: {}", r.rejected[k], kRejectNames[k]);
  }
  const std::string job = fmt::format("{}: no configuration of {} devices for a global batch of {}", sc.path, o.gpus,
                                      o.global_batch);
  std::string budget;
  if (r.max_microbatches > 0) {
    budget = fmt::format("; those with more than {} microbatches were left out (the whole space is about {:.2g} ops, "
                         "above --max-plan-ops: raise it to plan them)",
                         r.max_microbatches, r.space_ops);
  }
  const auto count = [&](PlanReject k) { return r.rejected[static_cast<int>(k)]; };
  if (count(PlanReject::kMemory) == 0 && r.simulated == 0 && count(PlanReject::kBound) == 0) {
    std::string hint;
    if (r.layouts_rejected[static_cast<int>(PlanReject::kTopology)] == r.layouts && r.layouts > 0) {
      hint = sc.model.transformer ? ": T must divide the heads and the devices of a node"
                                  : ": T > 1 needs model.transformer (only its cost model shards layers)";
    }
    return fmt::format("{} can run ({} layouts{}){}{}", job, r.layouts, why, hint, budget);
  }
  return fmt::format("{} fits in {} per device ({} layouts{}){}", job, FormatBytes(r.memory_limit_bytes), r.layouts,
                     why, budget);
}

// Notes for what the space leaves out of what was asked or stated: a --tensor-parallel size no
// layout takes, the scenario's C where it does not divide the devices.
void NoteWhatIsLeftOut(const Space& space, PlanResult* result) {
  const PlanOptions& options = space.options;
  for (const int tp : options.tensor_parallel) {
    if (!detail::SomeLayoutTakes(space.contexts, options.gpus, tp)) {
      result->notes.push_back(fmt::format("--tensor-parallel {} divides no layout of {} devices: left out", tp, options.gpus));
    }
  }
  if (const int stated = space.base.pipeline.context_parallel;
      options.context_parallel.empty() &&
      std::find(space.contexts.begin(), space.contexts.end(), stated) == space.contexts.end()) {
    result->notes.push_back(fmt::format("pipeline.context_parallel {} of the scenario does not divide the {} devices: "
                                        "not tried",
                                        stated, options.gpus));
  }
}

}  // namespace

PlanResult Plan(const sim::Scenario& scenario, const PlanOptions& options) {
  detail::CheckInputs(scenario, options);
  const auto start = Clock::now();
  Space space(scenario, options);
  detail::FillSpace(&space);

  PlanResult result;
  result.scenario = scenario.name;
  result.gpus = options.gpus;
  result.context_parallel = space.contexts;
  result.global_batch = options.global_batch;
  result.memory_limit_bytes = space.limit_bytes;
  result.threads = space.max_threads;
  std::vector<CostKey> keys;
  NoteWhatIsLeftOut(space, &result);
  std::vector<Candidate> all = detail::Enumerate(space, &result, &keys);
  detail::KeepWithinBudget(space, &all, &result);

  // One cost table per key, built on every core; then each configuration's closed forms.
  std::vector<const PlanConfig*> examples(keys.size(), nullptr);
  for (const Candidate& c : all) {
    if (examples[c.facts] == nullptr) examples[c.facts] = &c.config;
  }
  std::vector<Facts> facts(keys.size());
  ParallelFor(keys.size(), space.max_threads, [&](size_t i) {
    if (examples[i] != nullptr) facts[i] = BuildFacts(space, keys[i], *examples[i]);  // none: all left out by the budget
  });
  std::vector<Candidate> candidates;
  for (Candidate& c : all) {
    const Facts& f = facts[c.facts];
    if (!f.error.empty()) {
      ++result.rejected[static_cast<int>(PlanReject::kShape)];
    } else if (f.memory_floor > space.limit_bytes) {
      ++result.rejected[static_cast<int>(PlanReject::kMemory)];
    } else {
      c.floor_ns = detail::TimeFloorNs(f.floors, c.config.microbatches, scenario.pipeline.steps);
      candidates.push_back(std::move(c));
    }
  }
  for (size_t i = 0; i < facts.size(); ++i) {
    if (examples[i] != nullptr && facts[i].error.empty()) {
      result.cost_source = facts[i].costs.source;
      break;
    }
  }
  // Best floors first, so that the K-th best falls early and prunes the most.
  std::stable_sort(candidates.begin(), candidates.end(),
                   [](const Candidate& a, const Candidate& b) { return a.floor_ns < b.floor_ns; });
  Board board(options.top, options);
  board.SetCandidates(static_cast<int64_t>(candidates.size()));
  const auto cancelled = [&options] { return options.cancel != nullptr && options.cancel->load(); };
  ParallelFor(candidates.size(), space.max_threads, [&](size_t i) {
    if (!cancelled()) Evaluate(space, candidates[i], facts[candidates[i].facts], &board);
  });
  board.Finish(&result);
  if (cancelled()) return result;  // incomplete: the caller stopped it
  Rank(&result);
  Refine(space, &result);
  Rank(&result);
  const size_t offloaded = result.best() == nullptr ? detail::TryOffload(space, candidates, &result) : 0;
  if (offloaded > 0) Rank(&result);
  result.seconds = std::chrono::duration<double>(Clock::now() - start).count();
  if (result.best() == nullptr) {
    throw InputError(NothingFits(scenario, options, result) +
                     (offloaded > 0 ? fmt::format("; nor do the {} fastest with every stash offloaded to the host",
                                                  offloaded)
                                    : ""));
  }
  return result;
}

}  // namespace stagecraft::harness
