// The timeline: a time ruler with units over the groups' lanes on one shared axis, and the
// ways to move it — wheel zooms around the cursor, drag pans, right-drag (or shift-drag)
// zooms to a selection, and the keyboard: F/Home fit all, +/- zoom, arrows pan.
#include <imgui.h>

#include <algorithm>
#include <cmath>

#include "lanes.h"
#include "palette.h"
#include "panels.h"

namespace stagecraft::viz::app {
namespace {

constexpr float kRulerH = 26;
constexpr float kRulerMinTickPx = 110;
constexpr double kZoomStep = 1.5;
constexpr float kPanFraction = 0.15f;

// Minor ticks split a major step of 1·10^k or 5·10^k in five, one of 2·10^k in four.
int64_t MinorStepNs(int64_t major_ns) {
  int64_t lead = major_ns;
  while (lead >= 10) lead /= 10;
  return std::max<int64_t>(major_ns / (lead == 2 ? 4 : 5), 1);
}

int64_t FirstTick(int64_t start_ns, int64_t step_ns) {
  const int64_t q = start_ns / step_ns;
  return (q * step_ns < start_ns ? q + 1 : q) * step_ns;
}

void DrawRuler(const View& view, ImDrawList* dl, ImVec2 origin, float label_w) {
  const float x0 = origin.x + label_w;
  dl->AddRectFilled(origin, ImVec2(x0 + view.width_px, origin.y + kRulerH), Rgba(30, 32, 38));
  dl->AddText(ImVec2(origin.x + 6, origin.y + 6), Rgba(160, 160, 160), "time");
  const int64_t major = RulerStepNs(view, kRulerMinTickPx);
  const int64_t minor = MinorStepNs(major);
  dl->PushClipRect(ImVec2(x0, origin.y), ImVec2(x0 + view.width_px, origin.y + kRulerH), true);
  for (int64_t t = FirstTick(view.start_ns, minor); t <= view.end_ns; t += minor) {
    const float x = x0 + view.ToPx(t);
    const bool is_major = t % major == 0;
    dl->AddLine(ImVec2(x, origin.y + kRulerH - (is_major ? 12.0f : 5.0f)), ImVec2(x, origin.y + kRulerH),
                Rgba(200, 200, 200, is_major ? 220 : 120));
    if (is_major) dl->AddText(ImVec2(x + 3, origin.y + 3), Rgba(220, 220, 220), FormatTime(t).c_str());
  }
  dl->PopClipRect();
  dl->AddLine(ImVec2(origin.x, origin.y + kRulerH - 1), ImVec2(x0 + view.width_px, origin.y + kRulerH - 1),
              Rgba(255, 255, 255, 60));
}

void DrawGrid(const View& view, ImDrawList* dl, float x0, float y0, float y1) {
  const int64_t major = RulerStepNs(view, kRulerMinTickPx);
  for (int64_t t = FirstTick(view.start_ns, major); t <= view.end_ns; t += major) {
    const float x = x0 + view.ToPx(t);
    dl->AddLine(ImVec2(x, y0), ImVec2(x, y1), kGridLine);
  }
}

// Wheel zoom, drag pan (both axes), and the selection zoom, over the lanes canvas.
void HandleMouse(AppState* s, const Canvas& c, bool canvas_hovered, bool canvas_active) {
  ImGuiIO& io = ImGui::GetIO();
  const float mx = std::clamp(c.mouse.x - c.x, 0.0f, c.width_px);
  if (canvas_hovered && io.MouseWheel != 0 && !io.KeyShift) s->view.ZoomAround(mx, std::pow(1.25, io.MouseWheel));
  if (canvas_hovered && io.MouseWheel != 0 && io.KeyShift) ImGui::SetScrollY(ImGui::GetScrollY() - io.MouseWheel * 40);
  if (canvas_hovered && io.MouseWheelH != 0) s->view.Pan(io.MouseWheelH * 40);
  const bool start_select = canvas_hovered && (ImGui::IsMouseClicked(1) || (ImGui::IsMouseClicked(0) && io.KeyShift));
  if (start_select) s->select = {true, mx};
  if (s->select.active) {
    const float a = c.x + std::min(s->select.x0_px, mx), b = c.x + std::max(s->select.x0_px, mx);
    const ImVec2 clip_min = ImGui::GetWindowPos(), clip_max(clip_min.x + ImGui::GetWindowWidth(), clip_min.y + ImGui::GetWindowHeight());
    c.draw->AddRectFilled(ImVec2(a, clip_min.y), ImVec2(b, clip_max.y), kSelectionBand);
    c.draw->AddText(ImVec2(b + 4, c.mouse.y - 16), Rgba(255, 255, 255),
                    FormatTime(s->view.ToNs(std::max(s->select.x0_px, mx)) - s->view.ToNs(std::min(s->select.x0_px, mx))).c_str());
    if (!ImGui::IsMouseDown(0) && !ImGui::IsMouseDown(1)) {
      if (std::abs(mx - s->select.x0_px) > 4) {
        const int64_t t0 = s->view.ToNs(std::min(s->select.x0_px, mx)), t1 = s->view.ToNs(std::max(s->select.x0_px, mx));
        s->view.start_ns = t0;
        s->view.end_ns = std::max(t1, t0 + 10);
      }
      s->select.active = false;
    }
    return;
  }
  if (canvas_active && ImGui::IsMouseDragging(0, 0.0f)) {
    s->view.Pan(io.MouseDelta.x);
    ImGui::SetScrollY(ImGui::GetScrollY() - io.MouseDelta.y);
  }
}

}  // namespace

void HandleShortcuts(AppState* s, float cursor_px) {
  ImGuiIO& io = ImGui::GetIO();
  if (io.WantTextInput || ImGui::IsPopupOpen("", ImGuiPopupFlags_AnyPopupId) || io.KeyCtrl) return;
  const float at_px = cursor_px >= 0 ? cursor_px : s->view.width_px / 2;
  for (ImWchar ch : io.InputQueueCharacters) {
    switch (ch) {
      case 'f': case 'F': FitAll(s); break;
      case '+': case '=': s->view.ZoomAround(at_px, kZoomStep); break;
      case '-': case '_': s->view.ZoomAround(at_px, 1 / kZoomStep); break;
      case 's': case 'S': s->toggles.sub_lanes = !s->toggles.sub_lanes; break;
      case 'b': case 'B': s->toggles.bubbles = !s->toggles.bubbles; break;
      case 'c': case 'C': s->toggles.comm_lanes = !s->toggles.comm_lanes; break;
      default: break;
    }
  }
  if (ImGui::IsKeyPressed(ImGui::GetKeyIndex(ImGuiKey_Home))) FitAll(s);
  if (ImGui::IsKeyPressed(ImGui::GetKeyIndex(ImGuiKey_LeftArrow))) s->view.Pan(s->view.width_px * kPanFraction);
  if (ImGui::IsKeyPressed(ImGui::GetKeyIndex(ImGuiKey_RightArrow))) s->view.Pan(-s->view.width_px * kPanFraction);
  if (ImGui::IsKeyPressed(ImGui::GetKeyIndex(ImGuiKey_Escape))) s->select.active = false;
}

void DrawTimeline(AppState* s, ImVec2 size) {
  ImGui::BeginChild("timeline", size, true, ImGuiWindowFlags_NoScrollbar | ImGuiWindowFlags_NoScrollWithMouse);
  const float scrollbar = ImGui::GetStyle().ScrollbarSize;
  s->view.width_px = std::max(ImGui::GetContentRegionAvail().x - kLabelWidthPx - scrollbar, 50.0f);
  if (s->fit_pending && !s->groups.empty()) {
    FitAll(s);
    s->fit_pending = false;
  }
  DrawRuler(s->view, ImGui::GetWindowDrawList(), ImGui::GetCursorScreenPos(), kLabelWidthPx);
  ImGui::Dummy(ImVec2(0, kRulerH));
  ImGui::BeginChild("lanes", ImVec2(0, 0), false,
                    ImGuiWindowFlags_NoScrollWithMouse | ImGuiWindowFlags_AlwaysVerticalScrollbar);
  const ImVec2 origin = ImGui::GetCursorScreenPos();
  float content_h = 0;
  for (const Group& g : s->groups) content_h += GroupHeight(*s, g);
  const float visible_h = ImGui::GetContentRegionAvail().y;
  Canvas c{ImGui::GetWindowDrawList(), origin.x, origin.x + kLabelWidthPx, s->view.width_px, ImGui::GetIO().MousePos};
  ImGui::InvisibleButton("canvas", ImVec2(kLabelWidthPx + s->view.width_px, std::max({content_h, visible_h, 1.0f})),
                         ImGuiButtonFlags_MouseButtonLeft | ImGuiButtonFlags_MouseButtonRight);
  const bool hovered = ImGui::IsItemHovered(), active = ImGui::IsItemActive();
  c.mouse_inside = hovered && !s->select.active;
  c.draw->AddRectFilled(ImVec2(origin.x, ImGui::GetWindowPos().y),
                        ImVec2(c.x, ImGui::GetWindowPos().y + ImGui::GetWindowHeight()), Rgba(30, 32, 38));
  DrawGrid(s->view, c.draw, c.x, ImGui::GetWindowPos().y, ImGui::GetWindowPos().y + ImGui::GetWindowHeight());
  if (s->groups.empty()) {
    c.draw->AddText(ImVec2(c.x + 20, origin.y + 20), Rgba(200, 200, 200),
                    "No trace open: File > Open (Ctrl+O), or stagecraft-view TRACE.json [TRACE.json ...]");
  }
  Hover hover;
  float y = origin.y;
  for (int g = 0; g < static_cast<int>(s->groups.size()); ++g) {
    const float jump_y = DrawGroup(*s, g, c, y, &hover);
    if (jump_y >= 0 && s->jump.scroll_pending) {
      ImGui::SetScrollY(y - origin.y + jump_y - visible_h / 2);
      s->jump.scroll_pending = false;
    }
    y += GroupHeight(*s, s->groups[g]);
  }
  HandleMouse(s, c, hovered, active);
  if (hover.Any() && !s->select.active && !active) DrawOpTooltip(*s, hover);
  HandleShortcuts(s, hovered ? std::clamp(c.mouse.x - c.x, 0.0f, c.width_px) : -1.0f);
  ImGui::EndChild();
  ImGui::EndChild();
}

}  // namespace stagecraft::viz::app
