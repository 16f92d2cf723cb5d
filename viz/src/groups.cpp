// GroupTraces (groups.h): measured traces overlaid on predictions, replays beside them.
#include "stagecraft/viz/groups.h"

#include <algorithm>
#include <string_view>

namespace stagecraft::viz {
namespace {

bool IsMeasured(const LoadedTrace& t) { return t.trace.source == "measured"; }

// Pairs measured traces with predicted ones of the same schedule (`replays`: the replays only,
// else the others); `used` marks paired traces.
void PairSameSchedule(const std::vector<const LoadedTrace*>& t, bool replays, std::vector<bool>* used,
                      Grouping* out) {
  const int n = static_cast<int>(t.size());
  for (int m = 0; m < n; ++m) {
    if ((*used)[m] || !IsMeasured(*t[m])) continue;
    for (int p = 0; p < n; ++p) {
      if ((*used)[p] || IsMeasured(*t[p]) || IsReplay(t[p]->trace) != replays ||
          t[p]->trace.schedule != t[m]->trace.schedule) {
        continue;
      }
      Overlay overlay = MatchTraces(*t[p], *t[m]);
      if (!overlay.error.empty()) {
        out->messages.push_back(overlay.error);
        continue;
      }
      out->groups.push_back({p, m, -1, false, std::move(overlay)});
      (*used)[p] = (*used)[m] = true;
      break;
    }
  }
}

// A measured trace left alone while a predicted one is also alone: the user likely meant to
// overlay them, so say why not.
void ExplainUnpaired(const std::vector<const LoadedTrace*>& t, const std::vector<bool>& used, Grouping* out) {
  const int n = static_cast<int>(t.size());
  int lone_predicted = -1;
  for (int p = 0; p < n && lone_predicted < 0; ++p) {
    if (!used[p] && !IsMeasured(*t[p])) lone_predicted = p;
  }
  if (lone_predicted < 0) return;
  for (int m = 0; m < n; ++m) {
    if (used[m] || !IsMeasured(*t[m])) continue;
    Overlay overlay = MatchTraces(*t[lone_predicted], *t[m]);
    if (!overlay.error.empty()) out->messages.push_back(overlay.error);
  }
}

}  // namespace

bool IsReplay(const schedules::Trace& trace) {
  return trace.source == "predicted" && std::string_view(trace.costs).starts_with("replay:");
}

std::string SourceLabel(const schedules::Trace& trace) { return IsReplay(trace) ? "replay" : trace.source; }

Grouping GroupTraces(const std::vector<const LoadedTrace*>& traces) {
  Grouping out;
  const int n = static_cast<int>(traces.size());
  std::vector<bool> used(traces.size(), false);
  PairSameSchedule(traces, false, &used, &out);
  PairSameSchedule(traces, true, &used, &out);  // a run opened with only its replay
  // Each overlay of a prediction takes the first replay of its schedule that is still free.
  for (Group& g : out.groups) {
    if (IsReplay(traces[g.predicted]->trace)) continue;
    for (int r = 0; r < n && g.replay < 0; ++r) {
      if (!used[r] && IsReplay(traces[r]->trace) && traces[r]->trace.schedule == traces[g.measured]->trace.schedule) {
        g.replay = r;
        used[r] = true;
      }
    }
  }
  ExplainUnpaired(traces, used, &out);
  for (int i = 0; i < n; ++i) {
    if (used[i]) continue;
    Group g;
    (IsMeasured(*traces[i]) ? g.measured : g.predicted) = i;
    out.groups.push_back(std::move(g));
  }
  // Blocks in the order their first trace was opened, each replay right under its overlay.
  auto first = [](const Group& g) { return g.Overlaid() ? std::min(g.predicted, g.measured) : g.Lone(); };
  std::stable_sort(out.groups.begin(), out.groups.end(),
                   [&](const Group& a, const Group& b) { return first(a) < first(b); });
  for (size_t k = 0; k < out.groups.size(); ++k) {
    if (out.groups[k].replay < 0) continue;
    Group block;
    block.predicted = out.groups[k].replay;
    block.replay_block = true;
    out.groups.insert(out.groups.begin() + static_cast<std::ptrdiff_t>(k) + 1, std::move(block));
    ++k;
  }
  return out;
}

}  // namespace stagecraft::viz
