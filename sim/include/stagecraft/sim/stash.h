// How a rank's op times grow with the activations it holds stashed. On a CPU the stash competes
// with the layers for the caches: a schedule that holds every microbatch (GPipe) runs its F 4-9%
// and its B 7-11% slower on the 2-core reference machine than 1F1B runs the same ops. The
// profile's calibration measures it (a GPipe run beside the shallow ones, harness/
// calibration_runs.h) as a slope per op kind: the op's time relative to its per_step scale grows
// by `slope` for every microbatch of activations beyond what the shallow runs held on average
// (`at`), up to the most the deep run held (`deep`). Depth is counted in whole-rank
// microbatches: a rank of v stages adds 1/v at each F and drops it at the matching B or I.
#pragma once

#include <array>
#include <vector>

#include "stagecraft/scenario/fits.h"
#include "stagecraft/schedules/ir.h"

namespace stagecraft::sim {

// F, B, I, W -> 0..3 (kStashFields' order, their cost fields' in op_kinds.h); -1 for every other kind.
int StashKindIndex(schedules::OpKind kind);

// The stash depth at the start of every op: by rank and index in the rank's list. A B or I
// counts its own microbatch (its activations are still held while it runs).
std::vector<std::vector<double>> StashDepths(const schedules::Schedule& s);

// An op's time factor at `depth`: 1 + slope × (min(depth, deep) − at) for F, B, I and W when
// that is more than `at`, else 1 (so no order's op is shorter than its per_step cost, and the
// search's bound stays a bound), at most 2; 1 for every other kind.
double StashFactor(const StashScale& scale, schedules::OpKind kind, double depth);

// Per stage, for F, B, I and W: the mean StashFactor over the schedule's ops of that stage and
// kind (1 where it has none, and everywhere when `rank_stash` is empty): what a microbatch's pass
// costs on average under this order, as simulate --json reports it.
std::vector<std::array<double, 4>> MeanStashFactors(const schedules::Schedule& s,
                                                    const std::vector<StashScale>& rank_stash);

}  // namespace stagecraft::sim
