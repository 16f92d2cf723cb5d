// The summary table (per schedule, predicted vs measured with their error) and the list of
// the ops whose prediction misses the measurement most (a click jumps the timeline to one).
#include "panels.h"

#include <algorithm>
#include <cstdio>
#include <optional>
#include <string>
#include <tuple>

#include "format.h"
#include "stagecraft/base/stats.h"

namespace stagecraft::viz::app {
namespace {

constexpr int kDisagreementRows = 50;
const ImVec4 kErrorText(1.0f, 0.55f, 0.35f, 1.0f);

std::string Printf(const char* format, double value) {
  char text[64];
  std::snprintf(text, sizeof text, format, value);
  return text;
}

using schedules::RankMetrics;
using schedules::ScheduleMetrics;

template <typename F>
std::string PerRank(const ScheduleMetrics& s, F value) {
  std::string out;
  for (size_t r = 0; r < s.ranks_detail.size(); ++r) out += (r ? " / " : "") + value(s.ranks_detail[r]);
  return out;
}

// The prediction's error, as `stagecraft compare` computes it (base/stats.h).
std::string RelativeError(double predicted, double measured) {
  const std::optional<double> error = RelativeErrorPct(predicted, measured);
  return error ? Printf("%+.1f%%", *error) : "-";
}

void SummaryRow(const OpenTrace& t) {
  const std::optional<ScheduleMetrics>& summary = t.data->trace.summary;
  ImGui::TableNextRow();
  ImGui::TableNextColumn();
  ImGui::TextUnformatted(t.data->trace.schedule.c_str());
  ImGui::TableNextColumn();
  ImGui::TextUnformatted(SourceLabel(t.data->trace).c_str());
  if (!summary) {
    ImGui::TableNextColumn();
    ImGui::TextDisabled("no summary in this trace");
    return;
  }
  const ScheduleMetrics& s = *summary;
  ImGui::TableNextColumn();
  ImGui::Text("%.3f ms", s.step_time_ms);
  ImGui::TableNextColumn();
  ImGui::Text("%.0f /s", s.throughput_samples_per_s);
  ImGui::TableNextColumn();
  ImGui::Text("%.1f%%", 100 * s.bubble_fraction);
  ImGui::TableNextColumn();
  ImGui::TextUnformatted(PerRank(s, [](const RankMetrics& r) { return Printf("%.1f", r.busy_ms); }).c_str());
  ImGui::TableNextColumn();
  ImGui::TextUnformatted(
      PerRank(s, [](const RankMetrics& r) { return Printf("%.1f", r.peak_memory_bytes / 1048576.0); }).c_str());
  // training.target_loss: what the run took to get there, beside its throughput.
  ImGui::TableNextColumn();
  const std::string target = s.executor ? schedules::TargetText(*s.executor) : "";
  if (target.empty()) {
    ImGui::TextDisabled("-");
  } else {
    ImGui::Text("%s (loss %.4g)", target.c_str(), *s.executor->target_loss);
  }
}

void ErrorRow(const std::optional<ScheduleMetrics>& predicted, const std::optional<ScheduleMetrics>& measured) {
  if (!predicted || !measured) return;
  const ScheduleMetrics& p = *predicted;
  const ScheduleMetrics& m = *measured;
  ImGui::TableNextRow();
  ImGui::TableNextColumn();
  ImGui::TableNextColumn();
  ImGui::TextColored(kErrorText, "error");
  ImGui::TableNextColumn();
  ImGui::TextColored(kErrorText, "%s", RelativeError(p.step_time_ms, m.step_time_ms).c_str());
  ImGui::TableNextColumn();
  ImGui::TextColored(kErrorText, "%s", RelativeError(p.throughput_samples_per_s, m.throughput_samples_per_s).c_str());
  ImGui::TableNextColumn();
  ImGui::TextColored(kErrorText, "%+.1f pp", ErrorPp(p.bubble_fraction, m.bubble_fraction));
  std::string busy, memory;
  for (size_t r = 0; r < p.ranks_detail.size() && r < m.ranks_detail.size(); ++r) {
    busy += (r ? " / " : "") + RelativeError(p.ranks_detail[r].busy_ms, m.ranks_detail[r].busy_ms);
    memory += (r ? " / " : "") + RelativeError(static_cast<double>(p.ranks_detail[r].peak_memory_bytes),
                                               static_cast<double>(m.ranks_detail[r].peak_memory_bytes));
  }
  ImGui::TableNextColumn();
  ImGui::TextColored(kErrorText, "%s", busy.c_str());
  ImGui::TableNextColumn();
  ImGui::TextColored(kErrorText, "%s", memory.c_str());
}

// The error in two parts (schedules::SplitError, as `compare --trace` splits it): the run's own
// op times against the prediction's costs, and what the replay of them still misses.
void SplitRows(const std::optional<ScheduleMetrics>& predicted, const std::optional<ScheduleMetrics>& replay,
               const std::optional<ScheduleMetrics>& measured) {
  if (!predicted || !replay || !measured) return;
  const schedules::ErrorSplit e = schedules::SplitError(*predicted, *replay, *measured);
  for (const auto& [label, step, bubble] : {std::tuple{"cost drift", e.cost_drift_pct, e.cost_drift_pp},
                                           std::tuple{"model error", e.model_error_pct, e.model_error_pp}}) {
    ImGui::TableNextRow();
    ImGui::TableNextColumn();
    ImGui::TableNextColumn();
    ImGui::TextColored(kErrorText, "%s", label);
    ImGui::TableNextColumn();
    ImGui::TextColored(kErrorText, "%+.1f%%", step);
    ImGui::TableNextColumn();
    ImGui::TableNextColumn();
    ImGui::TextColored(kErrorText, "%+.1f pp", bubble);
  }
}

void DisagreementTable(AppState* s, int gi) {
  const Group& g = s->groups[gi];
  const auto& pred = s->traces[g.predicted].data->trace.ops;
  const std::string id = "disagree" + std::to_string(gi);
  if (!ImGui::BeginTable(id.c_str(), 5, ImGuiTableFlags_RowBg | ImGuiTableFlags_SizingStretchProp)) return;
  for (const char* name : {"op", "rank", "step", "start diff", "duration diff"}) ImGui::TableSetupColumn(name);
  ImGui::TableHeadersRow();
  int rows = 0;
  for (size_t i = 0; i < g.overlay.by_disagreement.size() && rows < kDisagreementRows; ++i) {
    const int k = g.overlay.by_disagreement[i];
    const MatchedOp& m = g.overlay.matched[k];
    const schedules::TraceOp& op = pred[m.predicted];
    if (s->toggles.compute_only && !schedules::IsCompute(op.op.kind)) continue;
    ++rows;
    ImGui::TableNextRow();
    ImGui::TableNextColumn();
    const bool selected = s->jump.group == gi && s->jump.matched == k;
    const std::string label = ActionName(op) + "##" + id + "_" + std::to_string(k);
    if (ImGui::Selectable(label.c_str(), selected, ImGuiSelectableFlags_SpanAllColumns)) JumpTo(s, gi, k);
    ImGui::TableNextColumn();
    ImGui::Text("%d", op.rank);
    ImGui::TableNextColumn();
    ImGui::Text("%d", op.op.step);
    ImGui::TableNextColumn();
    ImGui::TextUnformatted(SignedTime(m.start_diff_ns).c_str());
    ImGui::TableNextColumn();
    ImGui::TextUnformatted(SignedTime(m.duration_diff_ns).c_str());
  }
  ImGui::EndTable();
}

}  // namespace

void DrawSummaryPanel(const AppState& state) {
  ImGui::TextUnformatted("Summary per schedule (busy ms and peak MiB per rank, rank 0 / 1 / ...)");
  constexpr ImGuiTableFlags kFlags = ImGuiTableFlags_Borders | ImGuiTableFlags_RowBg |
                                     ImGuiTableFlags_SizingStretchProp | ImGuiTableFlags_ScrollY;
  if (!ImGui::BeginTable("summary", 8, kFlags)) return;
  ImGui::TableSetupScrollFreeze(0, 1);
  for (const char* name :
       {"schedule", "source", "step time", "throughput", "bubble", "busy ms", "peak MiB", "time to target"}) {
    ImGui::TableSetupColumn(name);
  }
  ImGui::TableHeadersRow();
  for (const Group& g : state.groups) {
    if (g.replay_block) continue;  // its rows are its overlay's
    if (g.predicted >= 0) SummaryRow(state.traces[g.predicted]);
    if (g.measured >= 0) SummaryRow(state.traces[g.measured]);
    if (g.Overlaid()) {
      ErrorRow(state.traces[g.predicted].data->trace.summary, state.traces[g.measured].data->trace.summary);
    }
    if (g.replay >= 0) {
      SummaryRow(state.traces[g.replay]);
      SplitRows(state.traces[g.predicted].data->trace.summary, state.traces[g.replay].data->trace.summary,
                state.traces[g.measured].data->trace.summary);
    }
  }
  ImGui::EndTable();
}

void DrawDisagreementPanel(AppState* state) {
  ImGui::TextUnformatted("Largest disagreements (click to jump)");
  ImGui::SameLine();
  ImGui::Checkbox("compute ops only", &state->toggles.compute_only);
  ImGui::BeginChild("disagreements_list");
  bool any = false;
  for (int g = 0; g < static_cast<int>(state->groups.size()); ++g) {
    const Group& group = state->groups[g];
    if (!group.Overlaid()) continue;
    any = true;
    ImGui::TextColored(ImVec4(0.6f, 0.8f, 1.0f, 1.0f), "%s: %zu matched, unmatched %d predicted, %d measured",
                       state->traces[group.predicted].data->trace.schedule.c_str(), group.overlay.matched.size(),
                       group.overlay.unmatched_predicted, group.overlay.unmatched_measured);
    DisagreementTable(state, g);
  }
  if (!any) {
    ImGui::TextWrapped("Open a predicted and a measured trace of the same schedule to compare them op by op.");
    for (const Message& m : state->overlay_messages) ImGui::TextColored(kErrorText, "%s", m.text.c_str());
  }
  ImGui::EndChild();
}

}  // namespace stagecraft::viz::app
