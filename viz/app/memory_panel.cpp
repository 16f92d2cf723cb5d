// Memory over time per rank, from the traces' counter events, over the timeline's visible
// range (so zooming the timeline zooms the plot). Each pixel column draws the highest value
// reached in it, so a short peak never disappears between samples.
#include <imgui.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "format.h"
#include "palette.h"
#include "panels.h"

namespace stagecraft::viz::app {
namespace {

using schedules::TraceCounter;

const Group* GroupOf(const AppState& s, int trace) {
  for (const Group& g : s.groups) {
    if (g.predicted == trace || g.measured == trace) return &g;
  }
  return nullptr;
}

std::string TraceName(const AppState& s, int i) {
  const auto& t = s.traces[i].data->trace;
  return t.schedule + " " + SourceLabel(t);
}

// The highest memory in each pixel column of `view` (NaN where the trace has no value).
std::vector<float> ColumnMax(const std::vector<TraceCounter>& counters, const View& view, int64_t shift, int64_t end_ns) {
  const int width = static_cast<int>(view.width_px);
  std::vector<float> cols(std::max(width, 0), NAN);
  auto next = std::upper_bound(counters.begin(), counters.end(), view.start_ns + shift,
                               [](int64_t t, const TraceCounter& c) { return t < c.time_ns; });
  float current = next == counters.begin() ? NAN : static_cast<float>(std::prev(next)->memory_bytes);
  for (int px = 0; px < width; ++px) {
    const int64_t col_end = view.ToNs(static_cast<float>(px + 1)) + shift;
    float highest = current;
    for (; next != counters.end() && next->time_ns < col_end; ++next) {
      current = static_cast<float>(next->memory_bytes);
      highest = std::isnan(highest) ? current : std::max(highest, current);
    }
    if (view.ToNs(static_cast<float>(px)) + shift > end_ns) break;
    cols[px] = highest;
  }
  return cols;
}

int64_t PeakBytes(const std::vector<TraceCounter>& counters) {
  int64_t peak = 0;
  for (const TraceCounter& c : counters) peak = std::max(peak, c.memory_bytes);
  return peak;
}

void PlotRank(const AppState& s, const std::vector<int>& traces, int rank, ImVec2 size) {
  ImDrawList* dl = ImGui::GetWindowDrawList();
  const ImVec2 a = ImGui::GetCursorScreenPos(), b(a.x + size.x, a.y + size.y);
  ImGui::Dummy(size);
  dl->AddRectFilled(a, b, Rgba(24, 26, 30));
  int64_t peak = 1;
  for (int i : traces) {
    if (rank < static_cast<int>(s.traces[i].data->memory.size())) peak = std::max(peak, PeakBytes(s.traces[i].data->memory[rank]));
  }
  View view = s.view;
  view.width_px = size.x;
  for (int i : traces) {
    const LoadedTrace& t = *s.traces[i].data;
    const Group* g = GroupOf(s, i);
    if (g == nullptr || rank >= static_cast<int>(t.memory.size())) continue;
    const int64_t shift = ShiftNs(s, *g, i);
    const std::vector<float> cols = ColumnMax(t.memory[rank], view, shift, t.end_ns);
    std::vector<ImVec2> line;
    auto flush = [&] {
      if (line.size() > 1) dl->AddPolyline(line.data(), static_cast<int>(line.size()), TraceColor(i), 0, 1.5f);
      line.clear();
    };
    for (size_t px = 0; px < cols.size(); ++px) {
      if (std::isnan(cols[px])) {
        flush();
        continue;
      }
      line.emplace_back(a.x + px, b.y - 2 - (size.y - 16) * cols[px] / static_cast<float>(peak));
    }
    flush();
  }
  dl->AddText(ImVec2(a.x + 4, a.y + 1), Rgba(200, 200, 200), ("rank " + std::to_string(rank) + "  peak " + Mebibytes(peak)).c_str());
}

// Swatch + name per trace, wrapping onto new lines when the panel is narrow.
void Legend(const AppState& s, const std::vector<int>& traces) {
  const float right = ImGui::GetWindowPos().x + ImGui::GetWindowContentRegionMax().x;
  for (int i : traces) {
    const float w = 12 + ImGui::GetStyle().ItemSpacing.x + ImGui::CalcTextSize(TraceName(s, i).c_str()).x;
    if (ImGui::GetCursorScreenPos().x + w > right) ImGui::NewLine();
    const ImVec2 p = ImGui::GetCursorScreenPos();
    ImGui::GetWindowDrawList()->AddRectFilled(ImVec2(p.x, p.y + 4), ImVec2(p.x + 10, p.y + 12), TraceColor(i));
    ImGui::Dummy(ImVec2(12, 12));
    ImGui::SameLine();
    ImGui::TextUnformatted(TraceName(s, i).c_str());
    ImGui::SameLine(0, 14);
  }
  ImGui::NewLine();
}

}  // namespace

void DrawMemoryPanel(AppState* s) {
  ImGui::TextUnformatted("Memory per rank (visible range)");
  ImGui::SameLine();
  int& choice = s->toggles.memory_trace;
  if (choice >= static_cast<int>(s->traces.size())) choice = -1;
  ImGui::SetNextItemWidth(std::max(ImGui::GetContentRegionAvail().x, 60.0f));
  const std::string preview = choice < 0 ? "all traces" : TraceName(*s, choice);
  if (ImGui::BeginCombo("##memory_trace", preview.c_str())) {
    if (ImGui::Selectable("all traces", choice < 0)) choice = -1;
    for (int i = 0; i < static_cast<int>(s->traces.size()); ++i) {
      if (ImGui::Selectable((TraceName(*s, i) + "##mem" + std::to_string(i)).c_str(), choice == i)) choice = i;
    }
    ImGui::EndCombo();
  }
  std::vector<int> traces;
  int ranks = 0;
  for (int i = 0; i < static_cast<int>(s->traces.size()); ++i) {
    if (choice >= 0 && i != choice) continue;
    traces.push_back(i);
    ranks = std::max(ranks, s->traces[i].data->ranks);
  }
  Legend(*s, traces);
  ImGui::BeginChild("memory_plots");
  const float avail_h = ImGui::GetContentRegionAvail().y;
  const float spacing = ImGui::GetStyle().ItemSpacing.y;
  const float h = std::max(40.0f, ranks > 0 ? avail_h / ranks - spacing : 40.0f);
  for (int r = 0; r < ranks; ++r) PlotRank(*s, traces, r, ImVec2(ImGui::GetContentRegionAvail().x, h));
  ImGui::EndChild();
}

}  // namespace stagecraft::viz::app
