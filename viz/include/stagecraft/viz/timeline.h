// What one frame draws of a lane, prepared without any GL: the view is a small plain struct
// (visible start/end in ns and the width in pixels), and PrepareLane turns the ops of the
// visible range (found by binary search) into draw records, merging runs of ops narrower than
// kMergePx into one block that carries their count (as good profilers do).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "stagecraft/viz/trace_set.h"

namespace stagecraft::viz {

inline constexpr float kMergePx = 2.0f;

struct View {
  int64_t start_ns = 0;
  int64_t end_ns = 1;
  float width_px = 1000.0f;

  double PxPerNs() const { return width_px / static_cast<double>(end_ns - start_ns); }
  float ToPx(int64_t t_ns) const { return static_cast<float>((t_ns - start_ns) * PxPerNs()); }
  int64_t ToNs(float x_px) const { return start_ns + static_cast<int64_t>(x_px / PxPerNs()); }
  // Zoom by `factor` (> 1 zooms in) keeping the time under x_px fixed.
  void ZoomAround(float x_px, double factor);
  void Pan(float dx_px);
  void Fit(int64_t start_ns, int64_t end_ns, double margin = 0.02);
};

struct DrawRecord {
  float x0_px = 0, x1_px = 0;  // clipped to [0, width_px]
  int op = -1;                 // Trace::ops index of a single op; -1 for a merged block
  int count = 1;               // ops merged into this record
};

// Appends the draw records of `lane` for `view` to `out` (cleared first). `shift_ns` is
// subtracted from every op time first (aligning a measured trace).
void PrepareLane(const LoadedTrace& trace, const Lane& lane, const View& view, int64_t shift_ns,
                 std::vector<DrawRecord>* out);

// The nice ruler step for a view: 1, 2 or 5 × 10^k ns so that ticks are >= min_px apart, and
// a label like "1.5 ms".
int64_t RulerStepNs(const View& view, float min_px);
std::string FormatTime(int64_t ns);

// Idle intervals of a compute lane within [start_ns, end_ns] (the bubble view).
std::vector<std::pair<int64_t, int64_t>> IdleIntervals(const LoadedTrace& trace, const Lane& lane, int64_t start_ns,
                                                       int64_t end_ns);

}  // namespace stagecraft::viz
