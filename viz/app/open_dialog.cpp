// File > Open. Dear ImGui has no native file dialog, so this is a path field with the .json
// files of the typed folder listed under it; a failed load keeps the dialog open with its error.
#include <imgui.h>
#include <imgui_stdlib.h>

#include <algorithm>
#include <filesystem>
#include <string>
#include <system_error>
#include <vector>

#include "panels.h"

namespace stagecraft::viz::app {
namespace {

namespace fs = std::filesystem;

constexpr char kPopup[] = "Open trace";
constexpr float kWidthPx = 700;

// The folder the typed path points into ("." when none), and its .json files and subfolders.
std::vector<fs::path> Listing(const std::string& typed) {
  fs::path dir = typed.empty() ? fs::path(".") : fs::path(typed);
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) dir = dir.has_parent_path() ? dir.parent_path() : fs::path(".");
  std::vector<fs::path> entries;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    const bool is_dir = it->is_directory(ec);
    if (is_dir || it->path().extension() == ".json") entries.push_back(it->path());
    if (entries.size() >= 500) break;
  }
  std::sort(entries.begin(), entries.end());
  return entries;
}

void Open(AppState* s) {
  const size_t before = s->load_messages.size();
  if (OpenTraceFile(s, s->open_dialog.path)) {
    s->open_dialog.error.clear();
    ImGui::CloseCurrentPopup();
  } else {
    s->open_dialog.error = s->load_messages.size() > before ? s->load_messages.back().text : "cannot open";
  }
}

void ListFolder(AppState* s) {
  ImGui::BeginChild("listing", ImVec2(kWidthPx, 260), true);
  if (ImGui::Selectable("..")) {
    fs::path p(s->open_dialog.path.empty() ? "." : s->open_dialog.path);
    std::error_code ec;
    if (!fs::is_directory(p, ec)) p = p.parent_path();
    s->open_dialog.path = fs::absolute(p, ec).parent_path().string() + "/";
  }
  for (const fs::path& p : Listing(s->open_dialog.path)) {
    std::error_code ec;
    const bool is_dir = fs::is_directory(p, ec);
    const std::string label = p.filename().string() + (is_dir ? "/" : "");
    if (ImGui::Selectable(label.c_str(), p.string() == s->open_dialog.path, ImGuiSelectableFlags_AllowDoubleClick)) {
      s->open_dialog.path = p.string() + (is_dir ? "/" : "");
      if (!is_dir && ImGui::IsMouseDoubleClicked(0)) Open(s);
    }
  }
  ImGui::EndChild();
}

}  // namespace

void DrawOpenDialog(AppState* s) {
  if (s->open_dialog.pending) {
    ImGui::OpenPopup(kPopup);
    s->open_dialog.pending = false;
  }
  if (!ImGui::BeginPopupModal(kPopup, nullptr, ImGuiWindowFlags_AlwaysAutoResize)) return;
  ImGui::TextUnformatted("Trace file (Chrome trace JSON written by stagecraft simulate/execute --trace):");
  ImGui::SetNextItemWidth(kWidthPx);
  if (ImGui::IsWindowAppearing()) ImGui::SetKeyboardFocusHere();
  const bool enter = ImGui::InputText("##path", &s->open_dialog.path, ImGuiInputTextFlags_EnterReturnsTrue);
  ListFolder(s);
  if (!s->open_dialog.error.empty()) {
    ImGui::PushTextWrapPos(ImGui::GetCursorPosX() + kWidthPx);
    ImGui::TextColored(ImVec4(1.0f, 0.4f, 0.4f, 1.0f), "%s", s->open_dialog.error.c_str());
    ImGui::PopTextWrapPos();
  }
  if (ImGui::Button("Open") || enter) Open(s);
  ImGui::SameLine();
  if (ImGui::Button("Cancel") || ImGui::IsKeyPressed(ImGui::GetKeyIndex(ImGuiKey_Escape))) {
    s->open_dialog.error.clear();
    ImGui::CloseCurrentPopup();
  }
  ImGui::EndPopup();
}

}  // namespace stagecraft::viz::app
