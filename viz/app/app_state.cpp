// Opening traces and pairing them into blocks (GroupTraces, groups.h); an overlay refused is a
// message, and its traces still show side by side.
#include "app_state.h"

#include <algorithm>
#include <cstdio>

#include <fmt/format.h>

namespace stagecraft::viz::app {
namespace {

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

void Regroup(AppState* s) {
  std::vector<Message> before = std::move(s->overlay_messages);
  s->overlay_messages.clear();
  std::vector<const LoadedTrace*> traces;
  for (const OpenTrace& t : s->traces) traces.push_back(t.data.get());
  Grouping grouping = GroupTraces(traces);
  s->groups = std::move(grouping.groups);
  for (std::string& text : grouping.messages) s->overlay_messages.push_back({std::move(text), true});
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
