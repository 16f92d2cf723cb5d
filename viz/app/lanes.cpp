// Draws one group's lanes from the draw records PrepareLane makes for the visible range only:
// fills, labels that fit, predicted outlines (red where prediction and measurement disagree),
// bubbles, and the op under the mouse.
#include "lanes.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "palette.h"
#include "stagecraft/schedules/json_io.h"

namespace stagecraft::viz::app {
namespace {

using schedules::Stream;
using schedules::TraceOp;

constexpr float kHeaderH = 22, kComputeH = 24, kSplitComputeH = 40, kCommH = 10, kSplitCommH = 16;
constexpr float kMinOutlinePx = 4;
constexpr float kGap = 2, kRankGap = 6, kGroupGap = 12;
constexpr Stream kStreams[] = {Stream::kCompute,    Stream::kSend,   Stream::kRecv,
                                Stream::kCollective, Stream::kToHost, Stream::kToDevice};

// Which rows a group's ranks have and how tall they are: compute, then send and recv (toggle C),
// then collective when a trace of the group has REDUCE_GRADs (a run with replicas), then to host
// and to device when one has copies (offload).
struct Rows {
  bool split = false;  // predicted and measured in sub-lanes
  bool comm = true;
  bool collective = false;
  bool copies = false;

  bool Shows(Stream st) const {
    if (st == Stream::kCollective) return collective;
    if (st == Stream::kToHost || st == Stream::kToDevice) return copies;
    return st == Stream::kCompute || comm;
  }
  float Height(Stream st) const {
    if (st == Stream::kCompute) return split ? kSplitComputeH : kComputeH;
    return split ? kSplitCommH : kCommH;
  }
  float RankH() const {
    float h = kRankGap;
    for (Stream st : kStreams) h += Shows(st) ? Height(st) + kGap : 0;
    return h;
  }
  // The row's top relative to the group's top.
  float Top(int rank, Stream row) const {
    float y = kHeaderH + rank * RankH();
    for (Stream st : kStreams) {
      if (st == row) break;
      y += Shows(st) ? Height(st) + kGap : 0;
    }
    return y;
  }
};

Rows RowsOf(const AppState& s, const Group& g) {
  Rows rows;
  rows.split = g.Overlaid() && s.toggles.sub_lanes;
  rows.comm = s.toggles.comm_lanes;
  for (int t : {g.predicted, g.measured}) {
    if (t >= 0 && HasLane(*s.traces[t].data, Stream::kCollective)) rows.collective = true;
    if (t >= 0 && (HasLane(*s.traces[t].data, Stream::kToHost) || HasLane(*s.traces[t].data, Stream::kToDevice))) {
      rows.copies = true;
    }
  }
  return rows;
}

const Lane* FindLane(const LoadedTrace& t, int rank, Stream st) {
  for (const Lane& lane : t.lanes) {
    if (lane.rank == rank && lane.stream == st) return &lane;
  }
  return nullptr;
}

// A predicted compute op whose measured twin's duration is off by more than the chosen share.
// Durations, not starts: the traces are aligned once, at the first step, so start differences
// pile up along a run and would paint everything after the first mispredicted op. Send/recv
// durations are mostly waiting, so they are left out.
bool Disagrees(const AppState& s, const Group& g, int predicted_op) {
  const TraceOp& op = s.traces[g.predicted].data->trace.ops[predicted_op];
  if (!schedules::IsCompute(op.op.kind)) return false;
  const int k = g.overlay.match_of_predicted[predicted_op];
  if (k < 0) return true;
  const double limit = s.toggles.disagree_pct / 100.0 * std::max<int64_t>(op.duration_ns, 1);
  return static_cast<double>(std::abs(g.overlay.matched[k].duration_diff_ns)) > limit;
}

// A workload's turn: "TASK F3" (task TASK's forward turn of shard 3), else "F3", else "3".
std::string TurnLabel(const TraceOp& op, const std::string& task, float width_px) {
  const std::string turn = std::string(schedules::KindName(op.op.kind)) + std::to_string(op.op.stage);
  const std::string full = task + " " + turn;
  if (ImGui::CalcTextSize(full.c_str()).x + 4 <= width_px) return full;
  if (ImGui::CalcTextSize(turn.c_str()).x + 4 <= width_px) return turn;
  return std::to_string(op.op.stage);
}

std::string OpLabel(const TraceOp& op, float width_px) {
  if (schedules::Info(op.op.kind).number == schedules::ActionNumber::kVersion) {  // STEP, REDUCE_GRAD
    const std::string name(schedules::KindName(op.op.kind));
    if (ImGui::CalcTextSize(name.c_str()).x + 4 <= width_px) return name;
    std::string initials(1, name[0]);  // "S", "RG"
    for (size_t i = 1; i < name.size(); ++i) {
      if (name[i - 1] == '_') initials += name[i];
    }
    return initials;
  }
  std::string full = std::string(schedules::KindName(op.op.kind)) + std::to_string(op.op.microbatch);
  if (ImGui::CalcTextSize(full.c_str()).x + 4 <= width_px) return full;
  return std::to_string(op.op.microbatch);
}

// A workload's trace names the task of each turn (its op's microbatch; the trace reader checked
// that every one has a name).
const std::string* TaskOf(const schedules::Trace& trace, const TraceOp* op) {
  if (op == nullptr || trace.tasks.empty()) return nullptr;
  return &trace.tasks[static_cast<size_t>(op->op.microbatch)];
}

void FillOp(ImDrawList* dl, ImVec2 a, ImVec2 b, const TraceOp* op, int count, const std::string* task) {
  const ImU32 color = op == nullptr ? kMergedColor
                      : task != nullptr ? TaskColor(op->op.microbatch, op->op.kind != schedules::OpKind::kF)
                                        : KindColor(op->op.kind);
  dl->AddRectFilled(a, b, color);
  const float w = b.x - a.x;
  if (w > 3) dl->AddRect(a, b, Rgba(0, 0, 0, 110));  // separates back-to-back ops
  if (b.y - a.y < 14) return;
  std::string text = op == nullptr ? "x" + std::to_string(count) : task != nullptr ? TurnLabel(*op, *task, w)
                                                                                  : OpLabel(*op, w);
  const ImVec2 size = ImGui::CalcTextSize(text.c_str());
  if (size.x + 4 > w) return;
  dl->AddText(ImVec2(a.x + (w - size.x) / 2, a.y + (b.y - a.y - size.y) / 2), kLabelText, text.c_str());
}

// One lane of one trace: `look_outline` draws outlines only (a predicted trace over a measured one).
struct LaneJob {
  const AppState* s;
  int g;
  int trace;
  int rank;
  Stream stream;
  float y0, y1;
  bool outline;
};

void DrawLane(const LaneJob& job, const Canvas& c, Hover* hover) {
  const Group& g = job.s->groups[job.g];
  const LoadedTrace& t = *job.s->traces[job.trace].data;
  const Lane* lane = FindLane(t, job.rank, job.stream);
  if (lane == nullptr) return;
  const int64_t shift = ShiftNs(*job.s, g, job.trace);
  const View& view = job.s->view;
  if (job.s->toggles.bubbles && !job.outline && job.stream == Stream::kCompute) {
    const int64_t from = std::max(view.start_ns + shift, t.start_ns), to = std::min(view.end_ns + shift, t.end_ns);
    const std::vector<schedules::GapInterval>& gaps = t.split[job.rank].gaps;
    auto it = std::lower_bound(gaps.begin(), gaps.end(), from,
                               [](const schedules::GapInterval& g, int64_t at) { return g.end_ns <= at; });
    for (; it != gaps.end() && it->start_ns < to; ++it) {
      const int64_t a = std::max(it->start_ns, from), b = std::min(it->end_ns, to);
      c.draw->AddRectFilled(ImVec2(c.x + view.ToPx(a - shift), job.y0), ImVec2(c.x + view.ToPx(b - shift), job.y1),
                            GapColor(it->cause));
    }
  }
  static std::vector<DrawRecord> records;  // reused frame to frame (one UI thread)
  PrepareLane(t, *lane, view, shift, &records);
  const bool predicted_side = g.Overlaid() && job.trace == g.predicted;
  for (const DrawRecord& r : records) {
    const ImVec2 a(c.x + r.x0_px, job.y0), b(c.x + std::max(r.x1_px, r.x0_px + 1), job.y1);
    const TraceOp* op = r.op >= 0 ? &t.trace.ops[r.op] : nullptr;
    const bool red = predicted_side && op != nullptr && Disagrees(*job.s, g, r.op);
    if (job.outline) {
      if (b.x - a.x >= kMinOutlinePx) {
        c.draw->AddRect(a, b, red ? kDisagreeOutline : kPredictedOutline, 0, 0, red ? 2.5f : 1.5f);
      } else if (red) {  // too narrow for an outline: a red mark over the lane still shows it
        c.draw->AddRectFilled(ImVec2(a.x, a.y - 1), ImVec2(std::max(b.x, a.x + 2), a.y + 3), kDisagreeOutline);
      }
    } else {
      FillOp(c.draw, a, b, op, r.count, TaskOf(t.trace, op));
      if (red) c.draw->AddRect(a, b, kDisagreeOutline, 0, 0, 2.5f);
    }
    const bool over = c.mouse.x >= a.x && c.mouse.x < b.x && c.mouse.y >= a.y && c.mouse.y < b.y;
    if (c.mouse_inside && over && !hover->Any()) *hover = {job.g, job.trace, r.op, op ? 0 : r.count};
  }
}

// A rank that shares its device (pipeline.ranks_per_device) names it: "rank 2 @dev 1".
std::string LaneLabel(const LoadedTrace& t, int rank, Stream st) {
  switch (st) {
    case Stream::kCompute: {
      if (!t.trace.tasks.empty()) return "device " + std::to_string(rank);  // a workload's
      const int device = schedules::SharedDeviceOf(t.trace, rank);
      return "rank " + std::to_string(rank) + (device >= 0 ? " @dev " + std::to_string(device) : "");
    }
    case Stream::kSend: return "  send";
    case Stream::kRecv: return "  recv";
    case Stream::kCollective: return "  collective";
    case Stream::kToHost: return "  to host";
    case Stream::kToDevice: return "  to device";
  }
  return "";
}

// The rank's collective part of the bubble split (SplitBubbles) as a share of the trace's span.
float CollectivePercent(const LoadedTrace& t, int rank) {
  if (static_cast<size_t>(rank) >= t.split.size() || t.end_ns <= t.start_ns) return 0;
  return 100.0f * static_cast<float>(t.split[rank].collective_ns) / static_cast<float>(t.end_ns - t.start_ns);
}

float IdlePercent(const LoadedTrace& t, int rank) {
  const Lane* lane = FindLane(t, rank, Stream::kCompute);
  if (lane == nullptr || t.end_ns <= t.start_ns) return 0;
  int64_t idle = 0;
  for (auto [a, b] : IdleIntervals(t, *lane, t.start_ns, t.end_ns)) idle += b - a;
  return 100.0f * static_cast<float>(idle) / static_cast<float>(t.end_ns - t.start_ns);
}

void DrawHeader(const AppState& s, int gi, const Canvas& c, float top) {
  const Group& g = s.groups[gi];
  const LoadedTrace& ref = *s.traces[g.Overlaid() ? g.predicted : g.Lone()].data;
  std::string text = ref.trace.schedule.empty() ? ref.path : ref.trace.schedule;
  if (g.Overlaid()) {
    text += s.toggles.sub_lanes ? "   predicted (upper sub-lane) vs measured (lower)"
                                : "   predicted (outline) vs measured (filled)";
  } else if (g.replay_block) {
    text += "   replay of the measured run above, from its own op and transfer times";
  } else {
    text += "   " + (ref.trace.source.empty() ? std::string("trace") : ref.trace.source);
  }
  if (const std::optional<schedules::Shape>& shape = ref.shape) {
    text += "   " + std::to_string(shape->ranks) + (shape->ranks == 1 ? " rank x " : " ranks x ") +
            std::to_string(shape->chunks) + (shape->chunks == 1 ? " chunk, " : " chunks, ") +
            std::string(schedules::PlacementName(shape->placement));
    if (!ref.trace.shape) text += " (read off the ops)";
  }
  if (!ref.trace.scenario.empty()) text += "   scenario " + ref.trace.scenario;
  c.draw->AddLine(ImVec2(c.label_x, top), ImVec2(c.x + c.width_px, top), Rgba(255, 255, 255, 60));
  c.draw->AddText(ImVec2(c.label_x + 4, top + 4), Rgba(255, 255, 255), text.c_str());
  // Step starts of the reference trace, where there is room for a label.
  const int64_t shift = ShiftNs(s, g, g.Overlaid() ? g.predicted : g.Lone());
  const float text_end = c.label_x + 8 + ImGui::CalcTextSize(text.c_str()).x;
  float last_x = -1e9f;
  for (size_t k = 0; k < ref.step_start_ns.size(); ++k) {
    const float x = c.x + s.view.ToPx(ref.step_start_ns[k] - shift);
    if (x < c.x || x > c.x + c.width_px || x - last_x < 70 || x < text_end) continue;
    c.draw->AddLine(ImVec2(x, top + 12), ImVec2(x, top + kHeaderH), Rgba(200, 200, 200, 160));
    c.draw->AddText(ImVec2(x + 3, top + 4), Rgba(180, 180, 180), ("step " + std::to_string(k)).c_str());
    last_x = x;
  }
}

void DrawLabels(const AppState& s, const Group& g, const Canvas& c, float top) {
  const Rows rows = RowsOf(s, g);
  const bool split = rows.split;
  const LoadedTrace& filled = *s.traces[g.Overlaid() ? g.measured : g.Lone()].data;
  for (int r = 0; r < GroupRanks(s, g); ++r) {
    for (Stream st : kStreams) {
      if (!rows.Shows(st)) continue;
      const float y = top + rows.Top(r, st);
      const float h = rows.Height(st);
      std::string text = LaneLabel(filled, r, st);
      if (st == Stream::kCompute && s.toggles.bubbles) {
        char idle[32];
        std::snprintf(idle, sizeof idle, "  idle %.1f%%", IdlePercent(filled, r));
        text += idle;
      } else if (st == Stream::kCollective && s.toggles.bubbles) {
        char share[32];  // of the time, the rank's STEPs waiting for their REDUCE_GRADs
        std::snprintf(share, sizeof share, " %.1f%%", CollectivePercent(filled, r));
        text += share;
      }
      const ImU32 col = st == Stream::kCompute ? Rgba(230, 230, 230) : Rgba(150, 150, 150);
      const float text_y = y + (h - ImGui::GetFontSize()) / 2;
      // A thin lane's name would crowd the ones beside it; the collective lane's is the only one
      // under its rank's send and recv lanes, so it keeps its name.
      if (st == Stream::kCompute || st == Stream::kCollective || h >= 12) {
        c.draw->AddText(ImVec2(c.label_x + 6, text_y), col, text.c_str());
      }
      if (split && st == Stream::kCompute) {
        c.draw->AddText(ImVec2(c.x - 16, y + 2), Rgba(150, 150, 150), "P");
        c.draw->AddText(ImVec2(c.x - 16, y + h / 2 + 2), Rgba(150, 150, 150), "M");
      }
      c.draw->AddRectFilled(ImVec2(c.x, y), ImVec2(c.x + c.width_px, y + h), kLaneBackground);
    }
  }
}

// Yellow boxes around the pair the disagreement list jumped to; returns its lane's y.
float DrawJump(const AppState& s, int gi, const Canvas& c, float top) {
  if (s.jump.group != gi || s.jump.matched < 0) return -1;
  const Group& g = s.groups[gi];
  const MatchedOp& m = g.overlay.matched[s.jump.matched];
  const Rows rows = RowsOf(s, g);
  float lane_y = -1;
  for (auto [trace, op_index] : {std::pair{g.predicted, m.predicted}, std::pair{g.measured, m.measured}}) {
    const TraceOp& op = s.traces[trace].data->trace.ops[op_index];
    float y0 = rows.Top(op.rank, op.stream);
    float h = rows.Height(op.stream);
    if (rows.split) {
      h /= 2;
      if (trace == g.measured) y0 += h;
    }
    const int64_t t0 = op.start_ns - ShiftNs(s, g, trace);
    const float x0 = c.x + s.view.ToPx(t0), x1 = std::max(c.x + s.view.ToPx(t0 + op.duration_ns), x0 + 2);
    c.draw->AddRect(ImVec2(x0 - 2, top + y0 - 2), ImVec2(x1 + 2, top + y0 + h + 2), kJumpOutline, 0, 0, 2.0f);
    lane_y = rows.Top(op.rank, schedules::Stream::kCompute);
  }
  return lane_y;
}

}  // namespace

float GroupHeight(const AppState& state, const Group& group) {
  return kHeaderH + GroupRanks(state, group) * RowsOf(state, group).RankH() + kGroupGap;
}

float DrawGroup(const AppState& s, int gi, const Canvas& c, float top, Hover* hover) {
  const Group& g = s.groups[gi];
  const Rows rows = RowsOf(s, g);
  const bool split = rows.split;
  DrawHeader(s, gi, c, top);
  DrawLabels(s, g, c, top);
  c.draw->PushClipRect(ImVec2(c.x, top), ImVec2(c.x + c.width_px, top + GroupHeight(s, g)), true);
  for (int r = 0; r < GroupRanks(s, g); ++r) {
    for (Stream st : kStreams) {
      if (!rows.Shows(st)) continue;
      const float y0 = top + rows.Top(r, st), y1 = y0 + rows.Height(st);
      if (!g.Overlaid()) {
        DrawLane({&s, gi, g.Lone(), r, st, y0, y1, false}, c, hover);
      } else if (split) {
        DrawLane({&s, gi, g.predicted, r, st, y0, (y0 + y1) / 2, false}, c, hover);
        DrawLane({&s, gi, g.measured, r, st, (y0 + y1) / 2 + 1, y1, false}, c, hover);
      } else {
        DrawLane({&s, gi, g.measured, r, st, y0, y1, false}, c, hover);
        DrawLane({&s, gi, g.predicted, r, st, y0, y1, true}, c, hover);
      }
    }
  }
  const float jump_y = DrawJump(s, gi, c, top);
  c.draw->PopClipRect();
  return jump_y;
}

}  // namespace stagecraft::viz::app
