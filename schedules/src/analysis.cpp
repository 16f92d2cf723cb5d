// IR-only analysis: in-flight activations, deferred weight gradients, live weight versions,
// and the unit-time grid (F = I = W = 1, B = 2, free communication).
#include "stagecraft/schedules/analysis.h"

#include <algorithm>
#include <optional>

#include <fmt/format.h>

#include "stagecraft/base/error.h"
#include "stagecraft/base/printable.h"
#include "stagecraft/schedules/edges.h"
#include "stagecraft/schedules/lifetimes.h"

namespace stagecraft::schedules {
namespace {

int64_t UnitCost(OpKind kind) { return Info(kind).unit_time; }

// `columns_at_least`: the makespan is not known yet, only a bound below it.
std::string GridTooLarge(const Schedule& s, int64_t columns, bool columns_at_least) {
  return fmt::format("{}: a grid of {} rows (ranks) by {}{} columns (time units) is too large to show; the grid "
                     "shows at most {} rows by {} columns: use --format csv or --format json",
                     Printable(s.name), s.ranks(), columns_at_least ? "at least " : "", columns, kMaxGridRows,
                     kMaxGridColumns);
}

}  // namespace

std::string GridSizeProblem(const Schedule& s) {
  // A rank runs its compute ops one after another: its busiest rank bounds the makespan below.
  int64_t busiest = 0;
  for (const auto& rank_ops : s.ops) {
    int64_t units = 0;
    for (const Op& op : rank_ops) units += UnitCost(op.kind);
    busiest = std::max(busiest, units);
  }
  if (s.ranks() > kMaxGridRows || busiest > kMaxGridColumns) return GridTooLarge(s, busiest, true);
  return "";
}

HeldPeak PeakHeld(const std::vector<Op>& rank_ops, size_t count, const std::function<int64_t(const Op&)>& weight) {
  const ActivationLifetimes lives(rank_ops);
  HeldPeak peak;
  int64_t held = 0;
  int inflight = 0;
  for (size_t i = 0; i < count && i < rank_ops.size(); ++i) {
    const int change = lives.ResidentChange(i);
    if (change == 0) continue;
    const StashInterval& interval = lives.Activations()[static_cast<size_t>(lives.ActivationsAt(i))];
    held += change * weight(rank_ops[static_cast<size_t>(interval.opened_at)]);
    inflight += change;
    if (change > 0 && held > peak.weight) peak = {held, inflight};
  }
  return peak;
}

int PeakInflight(const std::vector<Op>& rank_ops, size_t count) {
  return ActivationLifetimes(rank_ops).PeakInflight(count);
}

std::vector<RankAnalysis> Analyze(const Schedule& s) {
  std::vector<RankAnalysis> out(s.ops.size());
  for (size_t r = 0; r < s.ops.size(); ++r) {
    RankAnalysis& a = out[r];
    const ActivationLifetimes stashes(s.ops[r]);
    a.peak_inflight = stashes.PeakInflight(s.ops[r].size());
    a.peak_pending_w = stashes.PeakPendingW();
    const WeightLifetimes lives(s, static_cast<int>(r));
    for (int chunk = 0; chunk < s.shape.chunks; ++chunk) {
      const int stage = s.shape.StageOf(static_cast<int>(r), chunk);
      a.stage_peak_versions.push_back(lives.PeakVersions(stage));
      a.peak_weight_versions = std::max(a.peak_weight_versions, a.stage_peak_versions.back());
    }
  }
  return out;
}

UnitGrid UnitTimeGrid(const Schedule& s) {
  const UnitIndex idx(s);
  constexpr int64_t kNotYet = -1;
  std::vector<int64_t> produced_at(EdgeKeyCount(idx), kNotYet);  // by EdgeKey: the producer's end
  UnitGrid grid;
  grid.cells.resize(s.ops.size());
  std::vector<size_t> next(s.ops.size(), 0);
  std::vector<int64_t> free_at(s.ops.size(), 0);
  // The output of an F whose overlapped partner has not run yet: a pair's outputs leave when the
  // pair ends (its SENDs follow both ops, lower.h), as in the simulator.
  std::vector<std::optional<Edge>> held(s.ops.size());
  // Each rank's head op runs once its inputs are done; sweep until every rank is through.
  bool progress = true;
  while (progress) {
    progress = false;
    for (size_t r = 0; r < s.ops.size(); ++r) {
      while (next[r] < s.ops[r].size()) {
        const Op& op = s.ops[r][next[r]];
        int64_t ready = free_at[r];
        if (IsCompute(op.kind) && idx.InRange(op)) {
          const std::optional<Edge> in = InputEdge(s.shape, op);
          const int64_t input = in ? produced_at[EdgeKey(idx, *in)] : 0;
          if (input == kNotYet) break;
          ready = std::max(ready, input);
          const int64_t end = ready + UnitCost(op.kind);
          const bool opens_pair = next[r] + 1 < s.ops[r].size() && s.ops[r][next[r] + 1].overlapped;
          if (op.overlapped && held[r]) produced_at[EdgeKey(idx, *held[r])] = end;
          held[r].reset();
          if (const std::optional<Edge> out = OutputEdge(s.shape, op)) {
            if (opens_pair) {
              held[r] = out;
            } else {
              produced_at[EdgeKey(idx, *out)] = end;
            }
          }
          grid.cells[r].push_back({ready, UnitCost(op.kind), static_cast<int>(next[r])});
          free_at[r] = end;
          grid.makespan = std::max(grid.makespan, end);
        }
        ++next[r];
        progress = true;
      }
    }
  }
  for (size_t r = 0; r < s.ops.size(); ++r) {
    if (next[r] < s.ops[r].size()) {
      throw InputError(fmt::format("{}: rank {} never gets the input of {}: the schedule deadlocks",
                                   Printable(s.name), r, ActionString(s.ops[r][next[r]], s.microbatches)));
    }
  }
  return grid;
}

std::string RenderGrid(const Schedule& s) {
  if (std::string why = GridSizeProblem(s); !why.empty()) throw InputError(why);
  const UnitGrid grid = UnitTimeGrid(s);
  if (grid.makespan > kMaxGridColumns) throw InputError(GridTooLarge(s, grid.makespan, false));
  const auto analysis = Analyze(s);
  // A cell is the op's kind and global microbatch, with the stage in front when a rank has
  // several (interleaved), like the colours of the papers' figures.
  auto label = [&](const Op& op) {
    const int global = op.step * s.microbatches + op.microbatch;
    if (s.shape.chunks > 1) return fmt::format("{}{}{}", op.stage, KindName(op.kind), global);
    return fmt::format("{}{}", KindName(op.kind), global);
  };
  size_t width = 1;
  for (size_t r = 0; r < grid.cells.size(); ++r) {
    for (const auto& c : grid.cells[r]) width = std::max(width, label(s.ops[r][c.op_index]).size());
  }
  std::string out = fmt::format("{}: {} ranks, {} stages, {} microbatches x {} steps, weights {}\n", s.name, s.ranks(),
                                s.stages(), s.microbatches, s.steps, PolicyName(s.weights));
  out += fmt::format("unit time: F = I = W = 1, B = 2, communication free; '.' is idle\n");
  for (size_t r = 0; r < grid.cells.size(); ++r) {
    std::vector<std::string> row(grid.makespan, std::string("."));
    int64_t busy = 0;
    for (const auto& c : grid.cells[r]) {
      for (int64_t t = c.start; t < c.start + c.duration; ++t) row[t] = label(s.ops[r][c.op_index]);
      busy += c.duration;
    }
    out += fmt::format("rank {:>2} |", r);
    for (const auto& cell : row) out += fmt::format(" {:<{}}", cell, width);
    out += fmt::format(" | idle {}, in flight {}, versions {}\n", grid.makespan - busy, analysis[r].peak_inflight,
                       analysis[r].peak_weight_versions);
  }
  out += fmt::format("makespan {} units\n", grid.makespan);
  return out;
}

}  // namespace stagecraft::schedules
