// The hover tooltip of an op: what it is, and for an overlay its predicted and measured start
// and duration side by side with their difference.
#include <imgui.h>

#include "format.h"
#include "lanes.h"

namespace stagecraft::viz::app {
namespace {

using schedules::TraceOp;

void TimeRow(const char* name, int64_t start_ns, int64_t duration_ns) {
  ImGui::Text("%-10s start %-12s duration %s", name, FormatTime(start_ns).c_str(), FormatTime(duration_ns).c_str());
}

void OverlayRows(const AppState& s, const Group& g, int k) {
  const MatchedOp& m = g.overlay.matched[k];
  const TraceOp& p = s.traces[g.predicted].data->trace.ops[m.predicted];
  const TraceOp& q = s.traces[g.measured].data->trace.ops[m.measured];
  TimeRow("predicted", p.start_ns - ShiftNs(s, g, g.predicted), p.duration_ns);
  TimeRow("measured", q.start_ns - ShiftNs(s, g, g.measured), q.duration_ns);
  ImGui::Text("%-10s start %-12s duration %s", "difference", SignedTime(m.start_diff_ns).c_str(),
              SignedTime(m.duration_diff_ns).c_str());
  if (p.duration_ns > 0) {
    ImGui::TextDisabled("duration error %+.1f%%", 100.0 * static_cast<double>(m.duration_diff_ns) / p.duration_ns);
  }
}

}  // namespace

void DrawOpTooltip(const AppState& s, const Hover& hover) {
  if (!hover.Any()) return;
  ImGui::BeginTooltip();
  if (hover.op < 0) {
    ImGui::Text("%d ops too narrow to draw apart: zoom in (wheel, +, or drag a selection)", hover.merged);
    ImGui::EndTooltip();
    return;
  }
  const Group& g = s.groups[hover.group];
  const LoadedTrace& t = *s.traces[hover.trace].data;
  const TraceOp& op = t.trace.ops[hover.op];
  if (!t.trace.tasks.empty()) {  // a workload's turn (schedules::Trace::tasks)
    ImGui::Text("task %s   %s", t.trace.tasks[static_cast<size_t>(op.op.microbatch)].c_str(), t.trace.schedule.c_str());
    ImGui::Separator();
    ImGui::Text("%s of shard %d   step %d   turn %d   device %d",
                op.op.kind == schedules::OpKind::kF ? "forward" : "backward", op.op.stage, op.op.step, op.op_index,
                op.rank);
    TimeRow(SourceLabel(t.trace).c_str(), op.start_ns - ShiftNs(s, g, hover.trace), op.duration_ns);
    ImGui::EndTooltip();
    return;
  }
  ImGui::Text("%s   %s", ActionName(op).c_str(), t.trace.schedule.c_str());
  ImGui::Separator();
  ImGui::Text("kind %s   rank %d   stage %d   microbatch %d", std::string(schedules::KindName(op.op.kind)).c_str(),
              op.rank, op.op.stage, op.op.microbatch);
  ImGui::Text("step %d   version %d   op_index %d", op.op.step, op.op.version, op.op_index);
  // How stale the stage's weights are (the summary's weight delays, schedules/staleness.h).
  if (const auto& summary = t.trace.summary;
      summary && op.op.stage >= 0 && static_cast<size_t>(op.op.stage) < summary->weight_delays.size() &&
      schedules::IsCompute(op.op.kind) && op.op.kind != schedules::OpKind::kStep) {
    const schedules::StageDelay& d = summary->weight_delays[static_cast<size_t>(op.op.stage)];
    const bool forward = op.op.kind == schedules::OpKind::kF;
    ImGui::Text("weights up to %d update(s) behind synchronous SGD (stage %d's %s)", forward ? d.forward : d.backward,
                op.op.stage, forward ? "forwards" : "backwards");
  }
  if (op.op.peer >= 0) ImGui::Text("peer rank %d", op.op.peer);
  int k = -1;
  if (g.Overlaid()) {
    const auto& match = hover.trace == g.measured ? g.overlay.match_of_measured : g.overlay.match_of_predicted;
    k = match[hover.op];
  }
  if (k >= 0) {
    OverlayRows(s, g, k);
  } else {
    TimeRow(SourceLabel(t.trace).c_str(), op.start_ns - ShiftNs(s, g, hover.trace), op.duration_ns);
    if (g.Overlaid()) ImGui::TextDisabled("no matching op in the other trace");
  }
  ImGui::EndTooltip();
}

}  // namespace stagecraft::viz::app
