// The schedule search (search.h): the best generator's order (search_start.cpp), improved by
// simulated annealing over op orders within each rank (search_anneal.cpp), judged by the
// simulator; what changed (search_report.cpp).
#include "stagecraft/harness/search.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>

#include <fmt/format.h>

#include "search_parts.h"
#include "stagecraft/base/error.h"
#include "stagecraft/base/format.h"
#include "stagecraft/sim/topology.h"
#include "stagecraft/scenario/units.h"

namespace stagecraft::harness {

using schedules::Op;

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
  const auto elapsed = [&] { return std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count(); };
  sim::Scenario sc = scenario;
  const int steps = sc.pipeline.steps;
  sc.pipeline.steps = 1;
  SearchMemoryLimit limit = options.memory_limit;
  if (limit.bytes == 0 && limit.forwards == 0 && sc.pipeline.memory_limit_bytes > 0) {
    limit.bytes = sc.pipeline.memory_limit_bytes;
  }
  if (limit.bytes > 0) sc.pipeline.memory_limit_bytes = limit.bytes;  // zb-auto plans within it too
  const sim::Topology topo(sc.topology);
  const search_parts::Judge judge(sc, topo, steps);

  SearchResult result;
  const search_parts::Candidate c = search_parts::BestStart(sc, scenario.path, judge, steps, limit, options, &result);
  result.start_name = c.name;
  result.start = c.schedule;
  result.start_ns = c.step_ns;
  result.start_makespan_ns = c.run.makespan_ns();
  result.start_steady_ns = SteadyStepNs(c.run);
  result.steps = steps;
  result.memory_units = c.units;
  result.memory_limit = c.memory.limit.empty() || std::isinf(c.memory.limit.front()) ? 0 : c.memory.limit.front();

  schedules::RunRecord best_run;
  search_parts::Anneal(c, judge, options, elapsed, &result, &best_run);
  result.best_makespan_ns = best_run.makespan_ns();
  result.best_steady_ns = SteadyStepNs(best_run);
  // Why it is better: each rank's bubble and memory, before and after, and the moves.
  search_parts::DescribeChanges(c, best_run, &result);
  result.seconds = elapsed();
  return result;
}

}  // namespace stagecraft::harness
