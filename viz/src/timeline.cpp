// One frame's preparation of a lane, no GL: binary search for the first op that can reach the
// view, then plain draw records clipped to the view, with runs of sub-pixel ops folded into
// one counted block (Tracy's zone merging). Also the view's zoom/pan/fit and the ruler.
#include "stagecraft/viz/timeline.h"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include "stagecraft/base/check.h"

namespace stagecraft::viz {
namespace {

using schedules::TraceOp;

// Zoom limits: a view narrower than a few ns has nothing more to show, and a wider one than a
// century would overflow the arithmetic below.
constexpr int64_t kMinSpanNs = 10;
constexpr int64_t kMaxSpanNs = int64_t{3'000'000'000} * 1'000'000'000;

// An op with a duration shows when it overlaps the view; an instant one when it lies in it.
bool Visible(int64_t start_ns, int64_t end_ns, const View& view) {
  if (start_ns == end_ns) return view.start_ns <= start_ns && start_ns <= view.end_ns;
  return start_ns < view.end_ns && end_ns > view.start_ns;
}

float ClipPx(double x_px, float width_px) { return static_cast<float>(std::clamp(x_px, 0.0, double{width_px})); }

// A record a following narrow op may join: a folded block, or a single narrow op.
bool Foldable(const DrawRecord& r) { return r.count > 1 || r.x1_px - r.x0_px < kMergePx; }

// The index of the first op past `first` whose end, after shifting, is later than `time_ns`:
// every op in between ends at or before it (max_end_ns is a prefix maximum).
size_t FirstEndingAfter(const Lane& lane, size_t first, int64_t time_ns, int64_t shift_ns) {
  return std::upper_bound(lane.max_end_ns.begin() + first, lane.max_end_ns.end(), time_ns + shift_ns) -
         lane.max_end_ns.begin();
}

}  // namespace

void View::ZoomAround(float x_px, double factor) {
  SC_CHECK(factor > 0 && std::isfinite(factor), fmt::format("zoom factor {} must be positive", factor));
  if (width_px <= 0) return;  // a collapsed window has no cursor position to keep
  const double span_ns = static_cast<double>(end_ns - start_ns);
  const double at_ns = start_ns + x_px / static_cast<double>(width_px) * span_ns;  // stays under the cursor
  const double new_span_ns = std::clamp(span_ns / factor, double(kMinSpanNs), double(kMaxSpanNs));
  const int64_t span = std::llround(new_span_ns);
  start_ns = std::llround(at_ns - x_px / static_cast<double>(width_px) * static_cast<double>(span));
  end_ns = start_ns + span;
}

// Dragging semantics: the content follows the mouse, so dx_px > 0 shows earlier times.
void View::Pan(float dx_px) {
  if (width_px <= 0 || end_ns <= start_ns) return;
  const int64_t shift_ns = std::llround(dx_px / PxPerNs());
  start_ns -= shift_ns;
  end_ns -= shift_ns;
}

void View::Fit(int64_t first_ns, int64_t last_ns, double margin) {
  const int64_t span_ns = std::clamp(last_ns - first_ns, kMinSpanNs, kMaxSpanNs);
  const int64_t pad_ns = std::llround(static_cast<double>(span_ns) * std::max(margin, 0.0));
  start_ns = first_ns - pad_ns;
  end_ns = first_ns + span_ns + pad_ns;
}

// Walks the visible ops in start order. A narrow op (clipped width < kMergePx) joins the
// previous record when that is foldable and the op starts within kMergePx of its right edge;
// once a block is open, every following op that ends within kMergePx of its right edge (and in
// the view) joins it in one binary search, so a frame costs O(records · log ops), not O(ops).
void PrepareLane(const LoadedTrace& trace, const Lane& lane, const View& view, int64_t shift_ns,
                 std::vector<DrawRecord>* out) {
  out->clear();
  if (view.width_px <= 0 || view.end_ns <= view.start_ns) return;  // nothing to draw into
  const std::vector<TraceOp>& ops = trace.trace.ops;
  const double px_per_ns = view.PxPerNs();
  auto to_px = [&](int64_t t_ns) { return ClipPx(static_cast<double>(t_ns - view.start_ns) * px_per_ns, view.width_px); };
  const size_t n = lane.ops.size();
  size_t i = std::lower_bound(lane.max_end_ns.begin(), lane.max_end_ns.end(), view.start_ns + shift_ns) -
             lane.max_end_ns.begin();
  while (i < n) {
    const TraceOp& t = ops[lane.ops[i]];
    const int64_t start_ns = t.start_ns - shift_ns;
    const int64_t end_ns = start_ns + t.duration_ns;
    if (start_ns > view.end_ns) break;
    if (!Visible(start_ns, end_ns, view)) {
      ++i;
      continue;
    }
    const DrawRecord rec{to_px(start_ns), to_px(end_ns), lane.ops[i], 1};
    ++i;
    const bool narrow = rec.x1_px - rec.x0_px < kMergePx;
    if (!narrow || out->empty() || !Foldable(out->back()) || rec.x0_px > out->back().x1_px + kMergePx) {
      out->push_back(rec);
      if (!narrow) continue;
    } else {
      DrawRecord& block = out->back();
      block.x1_px = std::max(block.x1_px, rec.x1_px);
      block.op = -1;
      ++block.count;
    }
    // Fold the following ops that end near the block in one step. Only from an op that starts
    // in the view: before it, ops ending left of the view may follow and must not be counted.
    if (start_ns < view.start_ns) continue;
    DrawRecord& block = out->back();
    const double reach_px = std::min(double{block.x1_px} + kMergePx, double{view.width_px});
    const int64_t reach_ns = std::min(view.end_ns, view.start_ns + static_cast<int64_t>(reach_px / px_per_ns));
    const size_t next = FirstEndingAfter(lane, i, reach_ns, shift_ns);
    if (next == i) continue;
    block.x1_px = std::max(block.x1_px, to_px(lane.max_end_ns[next - 1] - shift_ns));
    block.count += static_cast<int>(next - i);
    block.op = -1;
    i = next;
  }
}

int64_t RulerStepNs(const View& view, float min_px) {
  const double px_per_ns = view.PxPerNs();
  constexpr int kMultipliers[] = {1, 2, 5};
  for (int64_t power = 1; power <= kMaxSpanNs / 10; power *= 10) {
    for (int m : kMultipliers) {
      if (static_cast<double>(power * m) * px_per_ns >= min_px) return power * m;
    }
  }
  return kMaxSpanNs;
}

// Up to three decimals of the unit (exact for us), trailing zeros dropped, and at least one
// decimal below 10 so a ruler reads "1.5 ms, 2.0 ms" rather than "1.5 ms, 2 ms".
std::string FormatTime(int64_t ns) {
  if (ns < 0) return "-" + FormatTime(ns == INT64_MIN ? INT64_MAX : -ns);
  if (ns < 1000) return fmt::format("{} ns", ns);
  struct Unit {
    int64_t ns;
    const char* name;
  };
  constexpr Unit kUnits[] = {{1'000, "us"}, {1'000'000, "ms"}, {1'000'000'000, "s"}};
  auto thousandths_of = [ns](int64_t unit_ns) {  // rounded half up, without overflow
    const int64_t d = unit_ns / 1000;
    return ns / d + (ns % d >= (d + 1) / 2 && d > 1 ? 1 : 0);
  };
  int u = ns < 1'000'000 ? 0 : ns < 1'000'000'000 ? 1 : 2;
  int64_t thousandths = thousandths_of(kUnits[u].ns);
  if (u < 2 && thousandths >= 1'000'000) {  // 999.9996 ms rounds to 1000 ms: say 1.0 s
    thousandths = thousandths_of(kUnits[++u].ns);
  }
  const int64_t whole = thousandths / 1000;
  int frac = static_cast<int>(thousandths % 1000);
  int digits = 3;
  while (digits > 0 && frac % 10 == 0) {
    frac /= 10;
    --digits;
  }
  if (digits == 0 && whole >= 10) return fmt::format("{} {}", whole, kUnits[u].name);
  if (digits == 0) return fmt::format("{}.0 {}", whole, kUnits[u].name);
  return fmt::format("{}.{:0{}} {}", whole, frac, digits, kUnits[u].name);
}

std::vector<std::pair<int64_t, int64_t>> IdleIntervals(const LoadedTrace& trace, const Lane& lane, int64_t start_ns,
                                                       int64_t end_ns) {
  std::vector<std::pair<int64_t, int64_t>> idle;
  const std::vector<TraceOp>& ops = trace.trace.ops;
  int64_t busy_until_ns = start_ns;  // everything before it is covered (or already reported)
  size_t i = std::upper_bound(lane.max_end_ns.begin(), lane.max_end_ns.end(), start_ns) - lane.max_end_ns.begin();
  for (; i < lane.ops.size() && busy_until_ns < end_ns; ++i) {
    const TraceOp& t = ops[lane.ops[i]];
    if (t.start_ns >= end_ns) break;
    if (t.start_ns > busy_until_ns) idle.emplace_back(busy_until_ns, t.start_ns);
    busy_until_ns = std::max(busy_until_ns, t.start_ns + t.duration_ns);
  }
  if (busy_until_ns < end_ns) idle.emplace_back(busy_until_ns, end_ns);
  return idle;
}

}  // namespace stagecraft::viz
