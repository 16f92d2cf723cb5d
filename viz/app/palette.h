// The viewer's fixed colours, one per colour key of the op kinds (schedules/op_kinds.h), so a
// picture reads the same everywhere and tests can look for them in a screenshot (RGB, opaque):
//   F blue (66,133,244) · B green (52,168,83) · I teal (0,150,136) · W orange (251,140,0)
//   SEND_F/SEND_B grey (150,150,150) · RECV_F/RECV_B darker grey (115,115,115) · STEP purple (156,39,176)
//   REDUCE_GRAD pink (233,30,99); a workload's trace colours each task's turns by task instead
//   (kTaskColors: the first two (78,121,167) and (242,142,43), backward turns darker)
// Blocks of merged sub-pixel ops are slate (95,99,115); the bubble view tints the time a rank
// does not compute by cause (bubble_split.h): wait red, transfer amber, collective pink (a STEP
// waiting for its REDUCE_GRAD), overhead violet, idle grey;
// predicted ops over measured ones are a white outline, red where they disagree.
#pragma once

#include <imgui.h>

#include <iterator>

#include "stagecraft/schedules/bubble_split.h"
#include "stagecraft/schedules/ir.h"

namespace stagecraft::viz::app {

constexpr ImU32 Rgba(int r, int g, int b, int a = 255) { return IM_COL32(r, g, b, a); }

inline constexpr ImU32 kMergedColor = Rgba(95, 99, 115);
inline ImU32 GapColor(schedules::GapCause cause) {
  using schedules::GapCause;
  switch (cause) {
    case GapCause::kWait: return Rgba(230, 60, 60, 90);
    case GapCause::kTransfer: return Rgba(255, 193, 7, 110);
    case GapCause::kCollective: return Rgba(233, 30, 99, 110);
    case GapCause::kOverhead: return Rgba(171, 71, 188, 130);
    case GapCause::kIdle: return Rgba(160, 160, 160, 50);
    case GapCause::kOffloadWait: return Rgba(0, 150, 136, 120);
  }
  return Rgba(160, 160, 160, 50);
}
inline constexpr ImU32 kPredictedOutline = Rgba(235, 235, 235);
inline constexpr ImU32 kDisagreeOutline = Rgba(255, 60, 60);
inline constexpr ImU32 kJumpOutline = Rgba(255, 230, 0);
inline constexpr ImU32 kLabelText = Rgba(255, 255, 255);
inline constexpr ImU32 kSelectionBand = Rgba(255, 255, 255, 40);
inline constexpr ImU32 kGridLine = Rgba(255, 255, 255, 22);
inline constexpr ImU32 kLaneBackground = Rgba(255, 255, 255, 8);

// By schedules::ColorKey: forward, backward, backward_input, backward_weight, send, recv, step,
// collective, offload, reload, all_to_all.
inline constexpr ImU32 kKeyColors[schedules::kNumColorKeys] = {
    Rgba(66, 133, 244),  Rgba(52, 168, 83),   Rgba(0, 150, 136),  Rgba(251, 140, 0),  Rgba(150, 150, 150),
    Rgba(115, 115, 115), Rgba(156, 39, 176),  Rgba(233, 30, 99),  Rgba(121, 85, 72),  Rgba(141, 110, 99),
    Rgba(255, 87, 34)};
inline ImU32 KindColor(schedules::OpKind kind) { return kKeyColors[static_cast<size_t>(schedules::Info(kind).color)]; }

// A workload's trace (schedules::Trace::tasks): each task's turns in its own colour (Tableau 10,
// cycled), a forward turn in it and a backward turn darker (each channel x 0.7).
inline constexpr ImU32 kTaskColors[] = {Rgba(78, 121, 167),  Rgba(242, 142, 43),  Rgba(225, 87, 89),
                                        Rgba(118, 183, 178), Rgba(89, 161, 79),   Rgba(237, 201, 72),
                                        Rgba(176, 122, 161), Rgba(255, 157, 167), Rgba(156, 117, 95),
                                        Rgba(186, 176, 172)};
inline ImU32 TaskColor(int task, bool backward) {
  const ImU32 c = kTaskColors[static_cast<size_t>(task) % std::size(kTaskColors)];
  if (!backward) return c;
  const auto dim = [c](int shift) { return static_cast<int>(((c >> shift) & 0xFF) * 7 / 10); };
  return Rgba(dim(IM_COL32_R_SHIFT), dim(IM_COL32_G_SHIFT), dim(IM_COL32_B_SHIFT));
}

// Lines of the memory plot, one colour per open trace (cycled).
inline ImU32 TraceColor(int trace_index) {
  static constexpr ImU32 kColors[] = {Rgba(255, 202, 40), Rgba(0, 188, 212), Rgba(240, 98, 146),
                                      Rgba(174, 213, 129), Rgba(255, 138, 101), Rgba(179, 157, 219)};
  return kColors[trace_index % 6];
}

}  // namespace stagecraft::viz::app
