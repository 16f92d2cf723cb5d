// Placing activation copies (DESIGN.md §10; PipeOffload, Wan et al., ICML 2025): a rank moves the
// stashes that live longest to host memory while they wait for their backward, and brings them
// back ahead of it.
#pragma once

#include <vector>

#include "stagecraft/base/error.h"
#include "stagecraft/schedules/ir.h"

namespace stagecraft::schedules {

struct ActivationOffload {
  // Per stage, the share of its stage-microbatches whose activations are offloaded, in [0, 1];
  // a stage past the end offloads none.
  std::vector<double> fraction;
  // How many compute ops (F, B, I, W, STEP) before its B or I a RELOAD is placed, so that the copy
  // back has their time to hide in; never before its own OFFLOAD.
  int lookahead = 1;
  // Per stage, its own lookahead instead (a stage past the end takes `lookahead`): the harness sets
  // it from how long a copy takes against the stage's ops (PipeOffload places reloads by time).
  std::vector<int> stage_lookahead = {};

  int LookaheadOf(int stage) const {
    return stage >= 0 && static_cast<size_t>(stage) < stage_lookahead.size() ? stage_lookahead[stage] : lookahead;
  }
};

// For each stage, floor(fraction × n) of its n stage-microbatches get an OFFLOAD right after their
// F and a RELOAD LookaheadOf(stage) compute ops before their B or I: spread evenly, in F order, over
// those that hold their activations over more than that many compute ops (for the others the reload
// would follow the offload at once: the last stage of 1F1B, whose B follows its F, copies none), so
// that at any point of the list about that share of what the rank holds is on the host (at most
// as many as are worth a copy). Works on lists
// with or without SEND/RECV; activations already offloaded are left as they are, as is every
// other op. Throws InputError for a fraction outside [0, 1], a negative lookahead (of any stage), or a schedule
// with overlapped F;B pairs (dualpipe-v's), whose ops must stay adjacent (not placed yet).
Schedule PlaceActivationOffloads(const Schedule& schedule, const ActivationOffload& offload);

// Spilled weights (Hydra's shard at a time, Nagrecha & Kumar; DESIGN.md §10): each stage's
// weights (with their gradients) and optimizer state live in host memory and come to the device
// only for a visit, a run of a rank's compute ops (F, B, I, W, STEP) of that stage. Before a
// visit, a RELOAD of the weight version its first op reads (and, before a STEP, of the optimizer
// state of its update); after it, an OFFLOAD of the newest version (and after a STEP, of the
// optimizer state for the next update, the last STEP's included: it names the update after the
// run's last). A stage's first
// copies are RELOADs: its weights and optimizer state start on the host (tensors.h StartOnHost).
// With `double_buffer` a visit's RELOADs (its weights, and the optimizer state of its STEPs) go
// before the first compute op of the visit before it, so the copies overlap that whole visit, as
// Hydra prefetches the next shard while one computes (the device then holds two stages' weights);
// without, its weights' RELOAD goes right before the visit, after the OFFLOAD of the one before,
// and the optimizer state's right before its STEP. Works on lists with or without
// SEND/RECV; a list with copies already, or with overlapped F;B pairs, is refused (InputError).
struct WeightSpill {
  bool double_buffer = true;
};
Schedule PlaceWeightSpill(const Schedule& schedule, const WeightSpill& spill);

}  // namespace stagecraft::schedules
