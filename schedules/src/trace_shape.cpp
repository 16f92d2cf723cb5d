// A trace's shape (trace.h): what its header states, or, for a trace without the statement (an
// older file, a foreign one), the shape its ops fit.
#include <algorithm>
#include <cstdint>
#include <limits>

#include "stagecraft/schedules/trace.h"

namespace stagecraft::schedules {

std::optional<Shape> TraceShape(const Trace& trace) {
  if (trace.shape) return trace.shape;
  int64_t ranks = 0, stages = 0;
  for (const TraceOp& t : trace.ops) {
    if (t.rank >= 0) ranks = std::max(ranks, int64_t{t.rank} + 1);
    stages = std::max(stages, int64_t{t.op.stage} + 1);
  }
  if (ranks <= 0 || stages <= 0 || stages % ranks != 0 || stages > std::numeric_limits<int32_t>::max()) {
    return std::nullopt;
  }
  for (const Placement placement : {Placement::kLoop, Placement::kV}) {
    const Shape shape{static_cast<int>(ranks), static_cast<int>(stages / ranks), placement};
    const bool fits = std::all_of(trace.ops.begin(), trace.ops.end(), [&](const TraceOp& t) {
      return t.op.stage >= 0 && shape.RankOf(t.op.stage) == t.rank;
    });
    if (fits) return shape;
  }
  return std::nullopt;
}

}  // namespace stagecraft::schedules
