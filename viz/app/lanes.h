// One group's block of lanes on the timeline: a header, then per rank a compute lane with its
// send and recv lanes under it; ops coloured by kind, a predicted trace as an outline over the
// measured one (or in a sub-lane of its own), idle time tinted in the bubble view.
#pragma once

#include <imgui.h>

#include "app_state.h"

namespace stagecraft::viz::app {

inline constexpr float kLabelWidthPx = 150.0f;

// Where the lanes are drawn this frame, in screen pixels.
struct Canvas {
  ImDrawList* draw = nullptr;
  float label_x = 0;   // left edge of the label column
  float x = 0;         // screen x of view pixel 0
  float width_px = 0;  // the view's width
  ImVec2 mouse;
  bool mouse_inside = false;  // the mouse is over the lanes (not a popup, not outside)
};

// What the mouse is over: one op of one trace, or a merged block of `merged` ops.
struct Hover {
  int group = -1;
  int trace = -1;
  int op = -1;
  int merged = 0;
  bool Any() const { return op >= 0 || merged > 0; }
};

float GroupHeight(const AppState& state, const Group& group);
// Draws group `g` with its top at screen y `top`; fills `hover` when the mouse is over an op.
// Returns the content y (relative to `top`) of the op the disagreement list jumped to, or -1.
float DrawGroup(const AppState& state, int g, const Canvas& canvas, float top, Hover* hover);
void DrawOpTooltip(const AppState& state, const Hover& hover);

}  // namespace stagecraft::viz::app
