// The schedule search (search.h): the best generator's order, improved by simulated annealing
// over op orders within each rank, judged by the simulator.
#include "stagecraft/harness/search.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>
#include <optional>
#include <random>
#include <utility>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "stagecraft/base/error.h"
#include "stagecraft/base/format.h"
#include "stagecraft/harness/predict.h"
#include "stagecraft/schedules/generators.h"
#include "stagecraft/schedules/lower.h"
#include "stagecraft/schedules/validate.h"
#include "stagecraft/schedules/weight_policy.h"
#include "stagecraft/sim/cost_models.h"
#include "stagecraft/sim/engine.h"
#include "stagecraft/sim/topology.h"
#include "stagecraft/sim/units.h"

namespace stagecraft::harness {

using schedules::GeneratorInfo;
using schedules::Op;
using schedules::OpKind;
using schedules::Schedule;

SearchMemoryLimit SearchMemoryLimit::Parse(std::string_view text, std::string_view what) {
  SearchMemoryLimit limit;
  if (!text.empty() && text.back() == 'p') {
    const std::string number(text.substr(0, text.size() - 1));
    char* end = nullptr;
    const double k = std::strtod(number.c_str(), &end);
    if (number.empty() || end != number.c_str() + number.size() || !std::isfinite(k) || k <= 0 || k > 1e6) {
      throw InputError(fmt::format("{}: '{}' is not a limit: give a size (60GiB) or a multiple of p forwards' "
                                   "activations (2p)", what, text));
    }
    limit.forwards = k;
    return limit;
  }
  try {
    limit.bytes = sim::ParseBytes(text);
  } catch (const InputError& e) {
    throw InputError(fmt::format("{}: {} (or give a multiple of p forwards' activations: 2p)", what, e.what()));
  }
  if (limit.bytes <= 0) throw InputError(fmt::format("{}: the limit must be above 0 bytes, not '{}'", what, text));
  return limit;
}

std::string SearchMemoryLimit::Describe() const {
  if (forwards > 0) return fmt::format("{:g}p forwards' activations", forwards);
  if (bytes > 0) return FormatBytes(bytes);
  return "none";
}

namespace {

// What the op order decides of a rank's memory, per stage: an F adds `act` until its B frees it;
// an I swaps it for `stash`, which its W frees.
struct OrderMemory {
  std::vector<double> act, stash;
  std::vector<double> limit;  // per rank; +inf: none

  double Delta(const Op& op) const {
    const schedules::MemoryEffect& m = schedules::Info(op.kind).memory;  // F +act, B -act, I stash - act, W -stash
    return (m.w_stash == 0 ? 0 : m.w_stash * stash[op.stage]) +
           (m.activations == 0 ? 0 : m.activations * act[op.stage]);
  }
  double Peak(const std::vector<Op>& ops) const {
    double now = 0, peak = 0;
    for (const Op& op : ops) peak = std::max(peak, now += Delta(op));
    return peak;
  }
  bool Fits(const std::vector<Op>& ops, int rank) const { return Peak(ops) <= limit[rank] * (1 + 1e-12); }
};

// One starting point: a generator's one-step schedule and what judging it needs.
struct Candidate {
  std::string name;
  Schedule schedule;  // unlowered, weights assigned
  sim::CostTable costs;
  OrderMemory memory;
  std::string units;
  schedules::RunRecord run;  // its simulated step
};

class Judge {
 public:
  Judge(const sim::Scenario& sc, const sim::Topology& topo, int steps) : sc_(sc), topo_(topo), steps_(steps) {
    config_.record_memory = false;
    config_.rank_devices = sc.pipeline.RankDevices();
    config_.time_slice_ns = sc.topology.device.time_slice_ns;
    config_.replica_devices = sc.pipeline.ReplicaDevices();  // the REDUCE_GRADs' rings, with replicas
  }
  // The order's simulated step (its record in `record`), or nothing when the validator refuses
  // it.
  std::optional<int64_t> StepNs(const Schedule& unlowered, const sim::CostTable& costs,
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

 private:
  const sim::Scenario& sc_;
  const sim::Topology& topo_;
  int steps_;
  sim::SimConfig config_;
};

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
  if (use.bytes == 0 && use.forwards == 0 && sized) use.bytes = sc.topology.device.memory_bytes;  // the default
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

// The ops of `b` that are not in a longest common subsequence with `a` (the moved ones).
std::vector<size_t> MovedOps(const std::vector<Op>& a, const std::vector<Op>& b) {
  const size_t n = a.size(), m = b.size();
  std::vector<std::vector<int>> lcs(n + 1, std::vector<int>(m + 1, 0));
  for (size_t i = n; i-- > 0;) {
    for (size_t j = m; j-- > 0;) {
      lcs[i][j] = a[i] == b[j] ? lcs[i + 1][j + 1] + 1 : std::max(lcs[i + 1][j], lcs[i][j + 1]);
    }
  }
  std::vector<size_t> moved;
  size_t i = 0, j = 0;
  while (j < m) {
    if (i < n && a[i] == b[j]) {
      ++i, ++j;
    } else if (i < n && lcs[i + 1][j] >= lcs[i][j + 1]) {
      ++i;
    } else {
      moved.push_back(j++);
    }
  }
  return moved;
}

// Whether moving leaves each (stage, microbatch)'s F, B or I, W in order on the rank.
bool LocalOrderHolds(const std::vector<Op>& ops, size_t at) {
  const Op& moved = ops[at];
  if (!schedules::IsCompute(moved.kind)) return false;
  auto rank_of = [](OpKind k) {  // F, then B or I, then W
    return schedules::IsForward(k) ? 0 : schedules::Info(k).phase == schedules::Phase::kWeightBackward ? 2 : 1;
  };
  for (size_t i = 0; i < ops.size(); ++i) {
    const Op& o = ops[i];
    if (i == at || o.stage != moved.stage || o.microbatch != moved.microbatch || o.step != moved.step) continue;
    if (schedules::ProducesVersion(o.kind)) continue;
    if ((i < at) != (rank_of(o.kind) < rank_of(moved.kind))) return false;
  }
  // Before the step's STEP of its stage.
  for (size_t i = 0; i < at; ++i) {
    if (schedules::ProducesVersion(ops[i].kind) && ops[i].stage == moved.stage) return false;
  }
  return true;
}

}  // namespace

int64_t SteadyStepNs(const schedules::RunRecord& run) {
  int64_t step = 0;
  for (const schedules::RankRecord& r : run.ranks) {
    if (r.first_f_start_ns >= 0) step = std::max(step, r.last_compute_end_ns - r.first_f_start_ns);
  }
  return step;
}

int64_t RunStepNs(const schedules::RunRecord& one_step, int steps) {
  const int64_t k = std::max(steps, 1);
  return (one_step.makespan_ns() + (k - 1) * SteadyStepNs(one_step)) / k;
}

int64_t PlacementBoundNs(const schedules::Schedule& schedule, const schedules::RunRecord& run, int steps, int* rank) {
  // The shortest forward of each stage in `run` (its ops' times, the same in every order), and
  // from them when stage s's first forward can start at the earliest: after one microbatch's
  // forwards through stages 0 .. s-1, its transfers counted as free.
  const int stages = schedule.stages();
  std::vector<int64_t> forward(static_cast<size_t>(stages), std::numeric_limits<int64_t>::max());
  for (size_t r = 0; r < schedule.ops.size() && r < run.ranks.size(); ++r) {
    for (size_t i = 0; i < schedule.ops[r].size() && i < run.ranks[r].ops.size(); ++i) {
      const Op& op = schedule.ops[r][i];
      const schedules::OpTiming& t = run.ranks[r].ops[i];
      if (!schedules::IsForward(op.kind) || t.start_ns < 0 || op.stage < 0 || op.stage >= stages) continue;
      int64_t& f = forward[static_cast<size_t>(op.stage)];
      f = std::min(f, t.end_ns - t.start_ns);
    }
  }
  std::vector<int64_t> reach(static_cast<size_t>(stages), 0);
  for (size_t s = 1; s < reach.size(); ++s) {
    const int64_t f = forward[s - 1];
    reach[s] = reach[s - 1] + (f == std::numeric_limits<int64_t>::max() ? 0 : f);  // a stage that never ran: 0
  }
  int64_t one_step = 0, busiest = 0;
  int one_step_rank = 0, busiest_rank = 0;
  for (size_t r = 0; r < run.ranks.size(); ++r) {
    int64_t head = -1;  // the earliest any op of rank r can start: its earliest-reached stage's
    if (r < schedule.ops.size()) {
      for (const Op& op : schedule.ops[r]) {
        if (schedules::IsForward(op.kind) && op.stage >= 0 && op.stage < stages) {
          const int64_t at = reach[static_cast<size_t>(op.stage)];
          head = head < 0 ? at : std::min(head, at);
        }
      }
    }
    const int64_t busy = run.ranks[r].busy_ns;
    if (std::max<int64_t>(head, 0) + busy > one_step) {
      one_step = std::max<int64_t>(head, 0) + busy;
      one_step_rank = static_cast<int>(r);
    }
    if (busy > busiest) {
      busiest = busy;
      busiest_rank = static_cast<int>(r);
    }
  }
  const int64_t k = std::max(steps, 1);
  if (rank != nullptr) *rank = k == 1 ? one_step_rank : busiest_rank;
  return (one_step + (k - 1) * busiest) / k;
}

SearchResult SearchSchedule(const sim::Scenario& scenario, const SearchOptions& options) {
  const auto started = std::chrono::steady_clock::now();
  sim::Scenario sc = scenario;
  const int steps = sc.pipeline.steps;
  sc.pipeline.steps = 1;
  SearchMemoryLimit limit = options.memory_limit;
  if (limit.bytes == 0 && limit.forwards == 0 && sc.pipeline.memory_limit_bytes > 0) {
    limit.bytes = sc.pipeline.memory_limit_bytes;
  }
  if (limit.bytes > 0) sc.pipeline.memory_limit_bytes = limit.bytes;  // zb-auto plans within it too
  const sim::Topology topo(sc.topology);
  const Judge judge(sc, topo, steps);

  SearchResult result;
  std::vector<std::string> over_limit;  // the starts that ran but do not fit, for the error below
  std::optional<Candidate> best_start;
  int64_t best_start_ns = 0;
  for (const GeneratorInfo& info : schedules::Generators()) {
    const std::string name(info.name);
    if (!schedules::TrainsAsSequential(info.weights)) continue;  // another training, not another order
    if (!options.from.empty() && name != options.from) continue;
    schedules::GeneratorParams params = sim::GeneratorParamsFor(sc.pipeline, info);
    if (const std::string why = schedules::CheckParams(info, params); !why.empty()) {
      result.starts.push_back(fmt::format("{}: {}", name, why));
      continue;
    }
    Candidate c;
    c.name = name;
    try {
      if (info.uses_costs) params.costs = std::make_shared<const schedules::StagePassCosts>(PassCostsFor(sc, params));
      c.schedule = schedules::Generate(name, params);
    } catch (const InputError& e) {
      result.starts.push_back(fmt::format("{}: {}", name, e.what()));
      continue;
    }
    if (std::any_of(c.schedule.ops.begin(), c.schedule.ops.end(),
                    [](const std::vector<Op>& ops) { return std::any_of(ops.begin(), ops.end(), [](const Op& o) { return o.overlapped; }); })) {
      result.starts.push_back(name + ": overlapped F&B pairs are kept as they are, not searched");
      continue;
    }
    const Schedule lowered = schedules::Lower(c.schedule, sc.pipeline.p2p, sc.pipeline.p2p_buffers);
    c.costs = sim::BuildCosts(sc, lowered);
    // Judged at the mean op times: a profile's op-time variation is drawn per op position
    // (OpTimeFactor), and an order that moved its long ops onto short draws would win on noise.
    c.costs.op_time_cv = 0;
    c.memory = MemoryOf(sc, c.schedule, c.costs, limit, &c.units);
    bool fits = true;
    for (int r = 0; r < c.schedule.ranks(); ++r) fits &= c.memory.Fits(c.schedule.ops[static_cast<size_t>(r)], r);
    const std::optional<int64_t> ns = judge.StepNs(c.schedule, c.costs, &c.run);
    if (!ns) {
      result.starts.push_back(name + ": refused by the validator");
      continue;
    }
    int bound_rank = 0;
    // The bound from the ops' times without their stash (sim/stash.h: a stash only lengthens an
    // op), which no order of these stages goes below.
    schedules::RunRecord unstashed;
    if (!c.costs.rank_stash.empty()) {
      sim::CostTable plain = c.costs;
      plain.rank_stash.clear();
      judge.StepNs(c.schedule, plain, &unstashed);
    }
    const int64_t bound =
        PlacementBoundNs(lowered, c.costs.rank_stash.empty() ? c.run : unstashed, steps, &bound_rank);
    if (result.bound_ns == 0 || bound < result.bound_ns) {
      result.bound_ns = bound;
      result.bound_rank = bound_rank;
      result.bound_placement = fmt::format("{}, {} stages", c.schedule.shape.placement == schedules::Placement::kV ? "V" : "loop",
                                           c.schedule.stages());
    }
    const std::string times = fmt::format("{:.3f} ms (one step alone {:.3f}, a long run {:.3f})", *ns * 1e-6,
                                          c.run.makespan_ns() * 1e-6, SteadyStepNs(c.run) * 1e-6);
    if (!fits) {
      result.starts.push_back(fmt::format("{}: {}, over the memory limit", name, times));
      over_limit.push_back(name);
      continue;
    }
    result.starts.push_back(fmt::format("{}: {}", name, times));
    if (!best_start || *ns < best_start_ns ||
        (*ns == best_start_ns && c.run.makespan_ns() < best_start->run.makespan_ns())) {
      best_start_ns = *ns;
      best_start = std::move(c);
    }
  }
  if (!best_start) {
    if (!options.from.empty() && result.starts.empty()) {
      const GeneratorInfo* info = schedules::FindGenerator(options.from);
      throw InputError(fmt::format("--from {}: {}", options.from,
                                   info == nullptr ? "no such generator (" + schedules::GeneratorNames() + ")"
                                                   : "not a flush-policy schedule (the search keeps the training "
                                                     "as it is and changes the order)"));
    }
    // One line: the starts over the limit by name, the others (the generator or the validator
    // refused them) counted; DescribeSearch lists each start's reason when one fits.
    const size_t others = result.starts.size() - over_limit.size();
    throw InputError(fmt::format("{}: search: no generator gives a schedule within the memory limit ({} per rank): {} "
                                 "over it{}{}; raise the memory limit",
                                 scenario.path, limit.Describe(), over_limit.size(),
                                 over_limit.empty() ? "" : fmt::format(" ({})", fmt::join(over_limit, ", ")),
                                 others == 0 ? "" : fmt::format(", {} that could not start", others)));
  }
  const Candidate& c = *best_start;
  result.start_name = c.name;
  result.start = c.schedule;
  result.start_ns = best_start_ns;
  result.start_makespan_ns = c.run.makespan_ns();
  result.start_steady_ns = SteadyStepNs(c.run);
  result.steps = steps;
  result.memory_units = c.units;
  result.memory_limit = c.memory.limit.empty() || std::isinf(c.memory.limit.front()) ? 0 : c.memory.limit.front();

  // Simulated annealing. A move takes one compute op to another place in its rank's list, on
  // one rank, or the same (kind, microbatch) op of each rank's first stage on every rank at
  // once (a pipeline changes shape on all its ranks together: a longer warm-up, a W later). The
  // score is the step plus a twentieth of the ranks' mean span, so that among orders of one step
  // time the search prefers those that leave the other ranks slack, a way off a plateau.
  std::mt19937_64 rng(options.seed);
  Schedule current = c.schedule, best = c.schedule;
  // `step_ns`: the judge's RunStepNs of `rec`.
  auto score_of = [&](const schedules::RunRecord& rec, int64_t step_ns) {
    double spans = 0;
    for (const schedules::RankRecord& rr : rec.ranks) {
      spans += static_cast<double>(rr.last_compute_end_ns - std::max<int64_t>(rr.first_f_start_ns, 0));
    }
    return static_cast<double>(step_ns) + 0.05 * spans / static_cast<double>(rec.ranks.size());
  };
  schedules::RunRecord run, best_run = c.run;  // the move's simulation; the best order's
  double current_score = score_of(c.run, best_start_ns);
  int64_t best_ns = best_start_ns;
  double best_score = current_score;
  const double t0 = 0.01 * static_cast<double>(best_start_ns);  // accepts a 1% loss early on
  const double budget = std::max(options.budget_seconds, 0.0);
  auto elapsed = [&] { return std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count(); };
  int64_t tried = 0;
  const int ranks = current.ranks();
  for (;;) {
    const double progress = options.max_evaluations > 0 ? static_cast<double>(tried) / options.max_evaluations
                                                        : (budget > 0 ? elapsed() / budget : 1.0);
    if (progress >= 1 || (options.cancel != nullptr && options.cancel->load())) break;
    ++tried;
    // The shift: mostly near (1 to 4 places), sometimes far (up to 32).
    const int reach = rng() % 4 == 0 ? 32 : 4;
    const int magnitude = 1 + static_cast<int>(rng() % static_cast<uint64_t>(reach));
    const int shift = rng() % 2 == 0 ? magnitude : -magnitude;
    const bool everywhere = rng() % 3 == 0;
    std::vector<int> touched;
    std::vector<std::vector<Op>> saved;
    bool ok = true;
    auto move_on = [&](int rank, size_t from) {
      std::vector<Op>& ops = current.ops[static_cast<size_t>(rank)];
      const int to_signed = static_cast<int>(from) + shift;
      if (to_signed < 0 || to_signed >= static_cast<int>(ops.size())) return false;
      touched.push_back(rank);
      saved.push_back(ops);
      const Op moving = ops[from];
      ops.erase(ops.begin() + static_cast<std::ptrdiff_t>(from));
      ops.insert(ops.begin() + to_signed, moving);
      return LocalOrderHolds(ops, static_cast<size_t>(to_signed)) && c.memory.Fits(ops, rank);
    };
    const int pick_rank = static_cast<int>(rng() % static_cast<uint64_t>(ranks));
    const std::vector<Op>& picked_ops = current.ops[static_cast<size_t>(pick_rank)];
    const size_t pick = rng() % picked_ops.size();
    if (!schedules::IsCompute(picked_ops[pick].kind)) continue;
    const Op pattern = picked_ops[pick];
    if (!everywhere) {
      ok = move_on(pick_rank, pick);
    } else {
      const int chunk = current.shape.ChunkOf(pattern.stage);
      for (int r = 0; r < ranks && ok; ++r) {
        const std::vector<Op>& ops = current.ops[static_cast<size_t>(r)];
        const int stage = current.shape.StageOf(r, chunk);
        const auto it = std::find_if(ops.begin(), ops.end(), [&](const Op& o) {
          return o.kind == pattern.kind && o.stage == stage && o.microbatch == pattern.microbatch && o.step == pattern.step;
        });
        if (it != ops.end()) ok = move_on(r, static_cast<size_t>(it - ops.begin()));
      }
    }
    auto undo = [&] {
      for (size_t i = touched.size(); i-- > 0;) current.ops[static_cast<size_t>(touched[i])] = std::move(saved[i]);
    };
    if (touched.empty()) continue;
    if (!ok) {
      ++result.rejected;
      undo();
      continue;
    }
    const std::optional<int64_t> ns = judge.StepNs(current, c.costs, &run);
    if (!ns) {
      ++result.rejected;
      undo();
      continue;
    }
    ++result.evaluations;
    const double score = score_of(run, *ns);
    const double delta = score - current_score;
    const double temperature = t0 * (1 - progress);
    const double draw = std::uniform_real_distribution<double>(0, 1)(rng);
    if (delta <= 0 || (temperature > 0 && draw < std::exp(-delta / temperature))) {
      current_score = score;
      if (*ns < best_ns || (*ns == best_ns && score < best_score)) {
        if (*ns < best_ns) ++result.improvements;
        best_ns = *ns;
        best_score = score;
        best = current;
        best_run = run;
      }
    } else {
      undo();
    }
  }
  result.best = best;
  result.best_ns = best_ns;
  result.best_makespan_ns = best_run.makespan_ns();
  result.best_steady_ns = SteadyStepNs(best_run);

  // Why it is better: each rank's bubble and memory, before and after, and the moves.
  const schedules::RunRecord& before_run = c.run;
  const schedules::RunRecord& after_run = best_run;
  constexpr size_t kShown = 12;
  for (int r = 0; r < best.ranks(); ++r) {
    const auto& a = result.start.ops[static_cast<size_t>(r)];
    const auto& b = result.best.ops[static_cast<size_t>(r)];
    SearchRankChange ch;
    ch.rank = r;
    ch.bubble_before = 1 - static_cast<double>(before_run.ranks[static_cast<size_t>(r)].busy_ns) /
                               static_cast<double>(std::max<int64_t>(result.start_ns, 1));
    ch.bubble_after = 1 - static_cast<double>(after_run.ranks[static_cast<size_t>(r)].busy_ns) /
                              static_cast<double>(std::max<int64_t>(result.best_ns, 1));
    ch.memory_before = c.memory.Peak(a);
    ch.memory_after = c.memory.Peak(b);
    const std::vector<size_t> moved = MovedOps(a, b);
    ch.ops_moved = static_cast<int>(moved.size());
    for (size_t j : moved) {
      if (result.moved.size() >= kShown) break;
      const auto old = std::find(a.begin(), a.end(), b[j]);
      result.moved.push_back(fmt::format("rank {}: {} from place {} to {}", r,
                                         schedules::ActionString(b[j], best.microbatches), old - a.begin(), j));
    }
    result.ranks.push_back(ch);
  }
  result.seconds = elapsed();
  return result;
}

std::string DescribeSearch(const SearchResult& r) {
  std::string out = "generators (one step, flush policy):\n";
  for (const std::string& s : r.starts) out += "  " + s + "\n";
  const double gain = 100.0 * (1 - static_cast<double>(r.best_ns) / static_cast<double>(r.start_ns));
  out += fmt::format("(ms per step over the scenario's {} step(s); one step alone: its makespan; a long run: the largest "
                     "per-rank span of one step, as steps overlap)\n", r.steps);
  out += fmt::format("start: {} at {:.3f} ms per step (one step alone {:.3f}, a long run {:.3f})\n", r.start_name,
                     r.start_ns * 1e-6, r.start_makespan_ns * 1e-6, r.start_steady_ns * 1e-6);
  out += fmt::format("searched: {:.3f} ms per step (one step alone {:.3f}, a long run {:.3f}), {:.2f}% shorter ({} moves "
                     "simulated, {} refused unsimulated, {} improvements, {:.1f} s)\n",
                     r.best_ns * 1e-6, r.best_makespan_ns * 1e-6, r.best_steady_ns * 1e-6, gain, r.evaluations,
                     r.rejected, r.improvements, r.seconds);
  if (r.bound_ns > 0) {
    out += fmt::format("bound: no order of these stages can take under {:.3f} ms per step (placement {}: rank {}'s "
                       "compute{}); the searched order is {:.2f}% above it\n",
                       r.bound_ns * 1e-6, r.bound_placement, r.bound_rank,
                       r.steps == 1 ? ", after the forwards before its first op"
                                    : " per step, and one step's wait for the first",
                       100.0 * (static_cast<double>(r.best_ns) / static_cast<double>(r.bound_ns) - 1));
  }
  const bool bytes = r.memory_units == "bytes";
  auto mem = [&](double v) { return bytes ? fmt::format("{:.2f} GiB", v / (1 << 30)) : fmt::format("{:.2f}", v); };
  out += fmt::format("memory limit: {} ({})\n", r.memory_limit > 0 ? mem(r.memory_limit) : "none",
                     bytes ? "rank 0's room for activations and W stashes, after its weights, gradients, optimizer "
                             "state, workspace and receive buffers"
                           : "per rank, in forwards' activations of a whole stage");
  out += fmt::format("{:<6} {:>14} {:>14} {:>16} {:>16} {:>10}\n", "rank", "bubble before", "bubble after",
                     "memory before", "memory after", "ops moved");
  for (const SearchRankChange& c : r.ranks) {
    out += fmt::format("{:<6} {:>13.2f}% {:>13.2f}% {:>16} {:>16} {:>10}\n", c.rank, 100 * c.bubble_before,
                       100 * c.bubble_after, mem(c.memory_before), mem(c.memory_after), c.ops_moved);
  }
  if (!r.moved.empty()) {
    out += "moves against the start (place = index in the rank's list):\n";
    for (const std::string& m : r.moved) out += "  " + m + "\n";
  }
  return out;
}

}  // namespace stagecraft::harness
