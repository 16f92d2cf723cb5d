// Expert parallelism in the IR (DESIGN.md §10): the ALL_TO_ALL ops of a schedule whose stages
// hold mixture-of-experts layers. One ALL_TO_ALL per F, B and I of such a stage stands for the
// all-to-alls of that op's MoE layers (each layer's dispatch of its tokens to the experts'
// devices and their combine back; in the backward, their gradients'); a W has none (the
// experts' weight gradients stay on their devices).
//
// Where they sit: right after their compute op, before its SEND; after an overlapped F&B pair
// (Op::overlapped, DualPipe's) both come after the pair, the F's first. What they mean to an
// engine: an ALL_TO_ALL reads its op's output and the rank goes on past it only when it ends (the
// compute of the layers after each all-to-all waits on it); the ALL_TO_ALLs right after an
// overlapped pair instead start with the pair's first op and run beside the pair's computation,
// which goes on while they run (PairedAllToAlls), as DualPipe interleaves the two microbatches'
// chunks so that one's communication hides under the other's computation.
#pragma once

#include <vector>

#include "stagecraft/schedules/ir.h"
#include "stagecraft/schedules/validate.h"

namespace stagecraft::schedules {

// The ALL_TO_ALL of compute op `op` (an F, B or I): its stage, step and microbatch, its tensor
// activations for an F, gradients for a backward.
Op AllToAllOf(const Op& op);
// Whether `op` (an F, B or I) has one: every such op of a stage that holds MoE layers.
inline bool HasAllToAll(const Op& op) {
  return IsCompute(op.kind) && Info(op.kind).phase != Phase::kWeightBackward;
}

// Places the ALL_TO_ALLs (above) of the stages `expert_stages` marks (by stage; an empty list
// or none marked: none) in `schedule`, lowered or not, every other op keeping its order; any
// ALL_TO_ALL it held is dropped first.
Schedule PlaceAllToAlls(const Schedule& schedule, const std::vector<bool>& expert_stages);

// For each op of rank `rank`'s list: the index of the compute op whose start posts it when it is
// an ALL_TO_ALL right after an overlapped pair (the pair's first op), else -1.
std::vector<int> PairedAllToAlls(const Schedule& schedule, int rank);

namespace detail {
// Validate's checks of the ALL_TO_ALLs: each names a compute op of its rank's list that comes
// before it (its tensor activations for an F, gradients for a B or an I), at most one per op,
// with nothing but the pair's other op and ALL_TO_ALLs between them.
void CheckAllToAlls(const Schedule& schedule, std::vector<Diagnostic>* diags);
}  // namespace detail

}  // namespace stagecraft::schedules
