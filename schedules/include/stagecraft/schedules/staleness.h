// How stale the weights a schedule trains with are (issue 55; PipeDream, Harlap et al.; PipeMare,
// Yang et al.): for each F and each backward pass (B, I, W), how many updates its weights are
// behind those synchronous SGD would use for the same microbatch, that is, the update the
// microbatch's gradient feeds against the version the op reads: UpdateIndex(op) − VersionRead(op)
// (weights.h; the weight policies' rows in weight_policy.h). Synchronous schedules (every
// microbatch of step t reads version t) have none; PipeDream's stage s of p is p − 1 − s updates
// behind in the steady state (all p − 1 with vertical sync); PipeDream-2BW's every stage 1.
#pragma once

#include <vector>

#include "stagecraft/schedules/ir.h"

namespace stagecraft::schedules {

struct StageDelay {
  int stage = 0;
  int forward = 0;   // the most updates behind any of the stage's F ops is
  int backward = 0;  // the same over its B, I and W ops
  // Some microbatch's backward reads another version than its forward did (a stage that does
  // not stash: the gradient is then taken at other weights than the activations were).
  bool differ = false;
  friend bool operator==(const StageDelay&, const StageDelay&) = default;
};

// One per stage, in stage order.
std::vector<StageDelay> WeightDelays(const Schedule& schedule);

// Per op of rank `rank`'s list: for a B or I, the updates its stage made between the unit's F and
// it (the version it reads minus the version its F read), what PipeMare's discrepancy correction
// extrapolates back over (exec/weight_store.h); 0 for every other op, and where no F precedes.
std::vector<int> CorrectionSpans(const Schedule& schedule, int rank);

}  // namespace stagecraft::schedules
