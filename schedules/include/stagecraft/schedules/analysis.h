// Analysis from the IR alone: per rank the peak number of in-flight microbatches (forwards
// whose activations are stashed: F done, B or I not yet), pending weight gradients (I done,
// W not yet), the peak number of live weight versions, and a unit-time grid like the
// figures in the papers (F = I = W = 1 unit, B = 2 units, no communication cost).
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "stagecraft/schedules/ir.h"

namespace stagecraft::schedules {

struct RankAnalysis {
  int peak_inflight = 0;         // stage-microbatch activations stashed at once
  int peak_pending_w = 0;        // I done, W not yet (Zero Bubble's deferred weight grads)
  int peak_weight_versions = 0;  // max over this rank's stages of versions alive at once
  std::vector<int> stage_peak_versions;  // per local chunk, stage order
};

// What a rank holds in device memory at its peak over its first `count` ops, a stage-microbatch
// from its F until its B or I (Zero Bubble's W keeps only a weight-gradient stash, counted apart)
// but for the time it is offloaded (lifetimes.h ResidentBefore), each weighing weight(its F): the
// peak total, and how many stage-microbatches make it (the first peak).
struct HeldPeak {
  int64_t weight = 0;
  int inflight = 0;
};
HeldPeak PeakHeld(const std::vector<Op>& rank_ops, size_t count, const std::function<int64_t(const Op&)>& weight);

// The most stage-microbatches a rank holds at once over its first `count` ops (PeakHeld, each
// weighing 1).
int PeakInflight(const std::vector<Op>& rank_ops, size_t count);

// A version is alive from the STEP that produces it (version 0: from the start) until the
// later of its last reader and the STEP that replaces it as newest.
std::vector<RankAnalysis> Analyze(const Schedule& schedule);

// One compute op placed on the unit-time grid.
struct GridCell {
  int64_t start = 0;
  int64_t duration = 0;
  int op_index = 0;  // position in the rank's op list
};
struct UnitGrid {
  std::vector<std::vector<GridCell>> cells;  // per rank, compute ops in order
  int64_t makespan = 0;
};
// List-schedules compute ops in rank order with unit costs; data dependencies only.
UnitGrid UnitTimeGrid(const Schedule& schedule);

// The largest grid RenderGrid prints: one row per rank and one column per time unit, so that
// it stays readable on a terminal (at most 256 x 4096 cells, a few MB of text). A larger
// schedule is printed as CSV or JSON instead.
inline constexpr int kMaxGridRows = 256;
inline constexpr int64_t kMaxGridColumns = 4096;

// Empty when `schedule` fits the grid's limits as far as its ranks and the busiest rank's
// units show without scheduling it (cheap: call it before validating a large schedule); else
// the one-line reason, naming the size and the formats that print any schedule.
std::string GridSizeProblem(const Schedule& schedule);

// Renders the grid as text, one row per rank. Throws InputError (GridSizeProblem's line, or the
// same for the makespan, which is known once the grid is scheduled and before any text is
// made) for a schedule past the limits above, and when the schedule deadlocks.
std::string RenderGrid(const Schedule& schedule);

}  // namespace stagecraft::schedules
