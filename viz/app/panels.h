// The window's parts, each an immediate-mode function over the AppState: the frame layout,
// the timeline, the summary / disagreement / memory panels and the Open dialog.
#pragma once

#include <imgui.h>

#include "app_state.h"

namespace stagecraft::viz::app {

// The whole window for one frame (menu, messages, toolbar, timeline, bottom panels).
// Sets *quit when the user asks to leave.
void DrawFrame(AppState* state, bool* quit);

void DrawTimeline(AppState* state, ImVec2 size);
// Keyboard shortcuts of the timeline; `cursor_px` is the mouse in view pixels, or < 0.
void HandleShortcuts(AppState* state, float cursor_px);

void DrawSummaryPanel(const AppState& state);
void DrawDisagreementPanel(AppState* state);
void DrawMemoryPanel(AppState* state);

// File > Open: a path field (Dear ImGui has no native file dialog) with the folder's .json
// files listed under it; a trace that fails to load shows its error in the dialog.
void DrawOpenDialog(AppState* state);

}  // namespace stagecraft::viz::app
