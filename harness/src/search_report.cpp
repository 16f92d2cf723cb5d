// What the schedule search found and why it is better (search.h, search_parts.h).
#include <algorithm>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "search_parts.h"

namespace stagecraft::harness {
namespace search_parts {
namespace {

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

}  // namespace

void DescribeChanges(const Candidate& c, const schedules::RunRecord& after_run, SearchResult* result) {
  const schedules::RunRecord& before_run = c.run;
  constexpr size_t kShown = 12;
  for (int r = 0; r < result->best.ranks(); ++r) {
    const auto& a = result->start.ops[static_cast<size_t>(r)];
    const auto& b = result->best.ops[static_cast<size_t>(r)];
    SearchRankChange ch;
    ch.rank = r;
    ch.bubble_before = 1 - static_cast<double>(before_run.ranks[static_cast<size_t>(r)].busy_ns) /
                               static_cast<double>(std::max<int64_t>(result->start_ns, 1));
    ch.bubble_after = 1 - static_cast<double>(after_run.ranks[static_cast<size_t>(r)].busy_ns) /
                              static_cast<double>(std::max<int64_t>(result->best_ns, 1));
    ch.memory_before = c.memory.Peak(a);
    ch.memory_after = c.memory.Peak(b);
    const std::vector<size_t> moved = MovedOps(a, b);
    ch.ops_moved = static_cast<int>(moved.size());
    for (size_t j : moved) {
      if (result->moved.size() >= kShown) break;
      const auto old = std::find(a.begin(), a.end(), b[j]);
      result->moved.push_back(fmt::format("rank {}: {} from place {} to {}", r,
                                          schedules::ActionString(b[j], result->best.microbatches), old - a.begin(),
                                          j));
    }
    result->ranks.push_back(ch);
  }
}

}  // namespace search_parts

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
