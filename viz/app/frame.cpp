// One frame of the window: the menu, the messages (bad traces, refused overlays), a toolbar,
// the timeline, and under it the summary, disagreement and memory panels side by side.
#include <imgui.h>

#include <algorithm>

#include "format.h"
#include "panels.h"

namespace stagecraft::viz::app {
namespace {

// GLFW's key codes for letters are their upper-case ASCII codes, which is what the GLFW
// backend of Dear ImGui 1.86 puts in io.KeysDown.
constexpr int kKeyO = 'O';
constexpr int kKeyQ = 'Q';

constexpr const char* kShortcuts[] = {
    "wheel            zoom around the cursor",
    "drag             pan (both axes)",
    "right-drag       zoom to the selection (or shift + drag)",
    "shift + wheel    scroll the lanes",
    "F or Home        fit all",
    "+ / -            zoom in / out",
    "left / right     pan",
    "S                predicted as sub-lanes / as outlines",
    "B                bubble view: wait red, transfer amber, collective pink, reload teal, overhead violet, idle grey",
    "C                send/recv lanes",
    "Ctrl+O           open a trace",
    "Ctrl+Q           quit",
};

void MenuBar(AppState* s, bool* quit) {
  if (!ImGui::BeginMenuBar()) return;
  if (ImGui::BeginMenu("File")) {
    if (ImGui::MenuItem("Open...", "Ctrl+O")) s->open_dialog.pending = true;
    if (ImGui::MenuItem("Close all", nullptr, false, !s->traces.empty())) CloseAll(s);
    if (ImGui::MenuItem("Quit", "Ctrl+Q")) *quit = true;
    ImGui::EndMenu();
  }
  if (ImGui::BeginMenu("View")) {
    if (ImGui::MenuItem("Fit all", "F")) FitAll(s);
    ImGui::MenuItem("Predicted as sub-lanes", "S", &s->toggles.sub_lanes);
    ImGui::MenuItem("Bubbles by cause", "B", &s->toggles.bubbles);
    ImGui::MenuItem("Send/recv lanes", "C", &s->toggles.comm_lanes);
    ImGui::EndMenu();
  }
  if (ImGui::BeginMenu("Help")) {
    for (const char* line : kShortcuts) ImGui::TextUnformatted(line);
    ImGui::EndMenu();
  }
  ImGui::EndMenuBar();
}

void Messages(const AppState& s) {
  for (const auto* list : {&s.load_messages, &s.overlay_messages}) {
    for (const Message& m : *list) {
      const ImVec4 colour = m.error ? ImVec4(1.0f, 0.4f, 0.4f, 1.0f) : ImVec4(1.0f, 0.85f, 0.3f, 1.0f);
      ImGui::TextColored(colour, "%s %s", m.error ? "error:" : "warning:", m.text.c_str());
    }
  }
}

void Toolbar(AppState* s) {
  if (ImGui::Button("Fit all (F)")) FitAll(s);
  ImGui::SameLine();
  if (ImGui::Button(" + ")) s->view.ZoomAround(s->view.width_px / 2, 1.5);
  ImGui::SameLine();
  if (ImGui::Button(" - ")) s->view.ZoomAround(s->view.width_px / 2, 1 / 1.5);
  ImGui::SameLine(0, 20);
  ImGui::Checkbox("predicted as sub-lanes (S)", &s->toggles.sub_lanes);
  ImGui::SameLine();
  ImGui::Checkbox("bubbles (B)", &s->toggles.bubbles);
  ImGui::SameLine();
  ImGui::Checkbox("send/recv (C)", &s->toggles.comm_lanes);
  ImGui::SameLine(0, 20);
  ImGui::SetNextItemWidth(140);
  ImGui::SliderFloat("red: duration off by more than", &s->toggles.disagree_pct, 1, 200, "%.0f%%");
  ImGui::SameLine(0, 20);
  ImGui::TextDisabled("view %s .. %s  (%s)", FormatTime(s->view.start_ns).c_str(), FormatTime(s->view.end_ns).c_str(),
                      FormatTime(s->view.end_ns - s->view.start_ns).c_str());
}

void BottomPanels(AppState* s, float height) {
  const float w = ImGui::GetContentRegionAvail().x;
  ImGui::BeginChild("summary_panel", ImVec2(w * 0.40f, height), true);
  DrawSummaryPanel(*s);
  ImGui::EndChild();
  ImGui::SameLine();
  ImGui::BeginChild("disagreement_panel", ImVec2(w * 0.27f, height), true);
  DrawDisagreementPanel(s);
  ImGui::EndChild();
  ImGui::SameLine();
  ImGui::BeginChild("memory_panel", ImVec2(0, height), true);
  DrawMemoryPanel(s);
  ImGui::EndChild();
}

}  // namespace

void DrawFrame(AppState* s, bool* quit) {
  const ImGuiViewport* viewport = ImGui::GetMainViewport();
  ImGui::SetNextWindowPos(viewport->WorkPos);
  ImGui::SetNextWindowSize(viewport->WorkSize);
  constexpr ImGuiWindowFlags kFlags = ImGuiWindowFlags_NoDecoration | ImGuiWindowFlags_NoMove |
                                      ImGuiWindowFlags_NoSavedSettings | ImGuiWindowFlags_MenuBar |
                                      ImGuiWindowFlags_NoBringToFrontOnFocus;
  ImGui::PushStyleVar(ImGuiStyleVar_WindowRounding, 0);
  ImGui::Begin("stagecraft-view", nullptr, kFlags);
  ImGui::PopStyleVar();
  const ImGuiIO& io = ImGui::GetIO();
  if (io.KeyCtrl && ImGui::IsKeyPressed(kKeyO)) s->open_dialog.pending = true;
  if (io.KeyCtrl && ImGui::IsKeyPressed(kKeyQ)) *quit = true;
  MenuBar(s, quit);
  Messages(*s);
  Toolbar(s);
  const float avail_h = ImGui::GetContentRegionAvail().y;
  const float bottom_h = std::clamp(avail_h * 0.36f, 160.0f, 340.0f);
  DrawTimeline(s, ImVec2(0, std::max(avail_h - bottom_h - ImGui::GetStyle().ItemSpacing.y, 100.0f)));
  BottomPanels(s, bottom_h);
  DrawOpenDialog(s);
  ImGui::End();
}

}  // namespace stagecraft::viz::app
