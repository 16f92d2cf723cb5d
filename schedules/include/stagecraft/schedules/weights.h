// Weight versions and optimizer STEPs, assigned from the schedule's weight policy so that
// the simulator's memory model and the executor's weight store read the same facts.
//   kFlush : every op of step t reads version t; a stage STEPs (producing t+1) right after its
//            last backward (B or W) of step t.
//   kStash : PipeDream (Harlap et al., SOSP'19): F reads the stage's newest version, its
//            B/I/W read the version that F read; a STEP follows each microbatch's last
//            backward. With vertical sync every stage reads the version stage 0 read.
//   kTwoBW : PipeDream-2BW (Narayanan et al., ICML'21 §3.1): global microbatch k (1-indexed)
//            reads version max(floor((k-1)/m) - 1, 0); a STEP follows the last backward of
//            each step, so W(t+1) = W(t) - lr * grad(W(t-1)).
//   kNoStash: PipeMare (Yang et al., MLSys'21): every F, B, I and W reads the stage's newest
//            version where it runs, and a STEP follows each microbatch's last backward, so one
//            version lives and a backward reads the updates made since its forward.
#pragma once

#include <cstdint>
#include <vector>

#include "stagecraft/schedules/ir.h"

namespace stagecraft::schedules {

// Sets `version` on compute ops and inserts STEP ops; removes STEPs already present.
// Works on lowered and unlowered schedules.
void AssignWeights(Schedule* schedule);

// The optimizer update that a backward's weight gradient feeds and that a STEP applies: one
// per microbatch under kStash (a STEP after every backward), one per step otherwise (gradients
// accumulate over the step's microbatches). Gradients of one update are averaged at its STEP.
int64_t UpdateIndex(const Schedule& schedule, const Op& op);

// The weight version an op reads: F/B/I/W their `version`, a STEP the version it updates
// (`version` - 1); -1 for SEND/RECV, which touch no weights.
int VersionRead(const Op& op);

// Per rank and op index, for STEP ops: true when the STEP may update its stage's weights in
// place, because no later op on the rank reads the version it updates; false for a STEP that
// must first copy them (PipeDream's stash, 2BW's second version). False for every other op.
std::vector<std::vector<bool>> StepsInPlace(const Schedule& schedule);

}  // namespace stagecraft::schedules
