// Opening traces and pairing them: each measured trace overlays the first predicted trace of
// the same schedule; one that cannot (different schedule) is refused with a message and still
// shows side by side.
#include "app_state.h"

#include <algorithm>
#include <cstdio>

#include <fmt/format.h>

namespace stagecraft::viz::app {
namespace {

bool IsMeasured(const OpenTrace& t) { return t.data->trace.source == "measured"; }

// One line on stderr. An overlay refused is a warning there (the traces still show side by
// side), though the window shows it as an error.
void Print(const Message& m, bool error) {
  std::fprintf(stderr, "stagecraft-view: %s: %s\n", error ? "error" : "warning", m.text.c_str());
}

void PrintOnce(const std::vector<Message>& before, const Message& m) {
  for (const Message& b : before) {
    if (b.text == m.text) return;
  }
  Print(m, false);
}

// Pairs measured traces with predicted ones of the same schedule; `used` marks paired traces.
void PairSameSchedule(AppState* s, std::vector<bool>* used, std::vector<Message>* messages) {
  const int n = static_cast<int>(s->traces.size());
  for (int m = 0; m < n; ++m) {
    if (!IsMeasured(s->traces[m])) continue;
    for (int p = 0; p < n; ++p) {
      const OpenTrace& pt = s->traces[p];
      if ((*used)[p] || IsMeasured(pt) || pt.data->trace.schedule != s->traces[m].data->trace.schedule) continue;
      Overlay overlay = MatchTraces(*pt.data, *s->traces[m].data);
      if (!overlay.error.empty()) {
        messages->push_back({overlay.error, true});
        continue;
      }
      s->groups.push_back({p, m, std::move(overlay)});
      (*used)[p] = (*used)[m] = true;
      break;
    }
  }
}

// A measured trace left alone while a predicted one is also alone: the user likely meant to
// overlay them, so say why not (MatchTraces words the refusal).
void ExplainUnpaired(AppState* s, const std::vector<bool>& used, std::vector<Message>* messages) {
  const int n = static_cast<int>(s->traces.size());
  int lone_predicted = -1;
  for (int p = 0; p < n && lone_predicted < 0; ++p) {
    if (!used[p] && !IsMeasured(s->traces[p])) lone_predicted = p;
  }
  if (lone_predicted < 0) return;
  for (int m = 0; m < n; ++m) {
    if (used[m] || !IsMeasured(s->traces[m])) continue;
    Overlay overlay = MatchTraces(*s->traces[lone_predicted].data, *s->traces[m].data);
    if (!overlay.error.empty()) messages->push_back({overlay.error, true});
  }
}

void Regroup(AppState* s) {
  std::vector<Message> before = std::move(s->overlay_messages);
  s->overlay_messages.clear();
  s->groups.clear();
  std::vector<bool> used(s->traces.size(), false);
  PairSameSchedule(s, &used, &s->overlay_messages);
  ExplainUnpaired(s, used, &s->overlay_messages);
  for (int i = 0; i < static_cast<int>(s->traces.size()); ++i) {
    if (used[i]) continue;
    Group g;
    (IsMeasured(s->traces[i]) ? g.measured : g.predicted) = i;
    s->groups.push_back(std::move(g));
  }
  // Blocks in the order their first trace was opened.
  auto first = [](const Group& g) { return g.Overlaid() ? std::min(g.predicted, g.measured) : g.Lone(); };
  std::stable_sort(s->groups.begin(), s->groups.end(),
                   [&](const Group& a, const Group& b) { return first(a) < first(b); });
  for (const Message& m : s->overlay_messages) PrintOnce(before, m);
  s->jump = {};
}

}  // namespace

bool OpenTraceFile(AppState* state, const std::string& path) {
  LoadResult result = LoadTraceFile(path);
  if (!result.trace) {
    Message m{result.error.empty() ? path + ": cannot be read" : result.error, true};
    Print(m, true);
    state->load_messages.push_back(std::move(m));
    return false;
  }
  AddTrace(state, std::move(result.trace));
  return true;
}

void AddTrace(AppState* state, std::shared_ptr<const LoadedTrace> trace) {
  if (const int n = trace->skipped; n > 0) {
    Message m{n == 1 ? fmt::format("{}: 1 event skipped: {}", trace->path, trace->first_skipped)
                     : fmt::format("{}: {} events skipped, the first: {}", trace->path, n, trace->first_skipped),
              false};
    Print(m, false);
    state->load_messages.push_back(std::move(m));
  }
  OpenTrace t;
  t.data = std::move(trace);
  state->traces.push_back(std::move(t));
  Regroup(state);
  state->fit_pending = true;
}

void CloseAll(AppState* state) {
  state->traces.clear();
  state->load_messages.clear();
  Regroup(state);
  state->fit_pending = true;
}

int64_t ShiftNs(const AppState& state, const Group& group, int trace_index) {
  if (group.Overlaid()) {
    const int64_t predicted_start = state.traces[group.predicted].data->start_ns;
    return trace_index == group.measured ? predicted_start + group.overlay.offset_ns : predicted_start;
  }
  return state.traces[trace_index].data->start_ns;
}

int GroupRanks(const AppState& state, const Group& group) {
  int ranks = 0;
  for (int i : {group.predicted, group.measured}) {
    if (i >= 0) ranks = std::max(ranks, state.traces[i].data->ranks);
  }
  return ranks;
}

int64_t DisplayEndNs(const AppState& state) {
  int64_t end = 0;
  for (const Group& g : state.groups) {
    for (int i : {g.predicted, g.measured}) {
      if (i >= 0) end = std::max(end, state.traces[i].data->end_ns - ShiftNs(state, g, i));
    }
  }
  return end;
}

void FitAll(AppState* state) {
  const int64_t end = DisplayEndNs(*state);
  state->view.Fit(0, std::max<int64_t>(end, 1000));
}

void JumpTo(AppState* state, int group, int matched) {
  const Group& g = state->groups[group];
  const MatchedOp& m = g.overlay.matched[matched];
  const auto& p = state->traces[g.predicted].data->trace.ops[m.predicted];
  const auto& q = state->traces[g.measured].data->trace.ops[m.measured];
  const int64_t p0 = p.start_ns - ShiftNs(*state, g, g.predicted);
  const int64_t q0 = q.start_ns - ShiftNs(*state, g, g.measured);
  const int64_t t0 = std::min(p0, q0);
  const int64_t t1 = std::max(p0 + p.duration_ns, q0 + q.duration_ns);
  const int64_t span = std::max<int64_t>(t1 - t0, 1000);
  // Keep the zoom unless the pair would not fit or would be lost in it.
  const int64_t width = std::clamp(state->view.end_ns - state->view.start_ns, span * 3 / 2, span * 8);
  state->view.start_ns = (t0 + t1) / 2 - width / 2;
  state->view.end_ns = state->view.start_ns + width;
  state->jump = {group, matched, true};
}

}  // namespace stagecraft::viz::app
