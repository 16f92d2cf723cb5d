// The Zero Bubble scheduler's passes of a stage (F, B as our I, W), shared by its heuristic
// (zb_auto.cpp) and its refinement (zb_ilp.cpp): their index, their op kind, their cost and
// the memory each adds.
#pragma once

#include "stagecraft/schedules/ir.h"

namespace stagecraft::schedules::zb {

enum Pass : int { kPassF = 0, kPassB = 1, kPassW = 2 };

inline constexpr OpKind kPassKinds[] = {OpKind::kF, OpKind::kI, OpKind::kW};

// F, B or I, W -> their pass (the phase of the unit, op_kinds.h).
inline int PassOf(OpKind kind) {
  const Phase phase = Info(kind).phase;
  return phase == Phase::kForward ? kPassF : phase == Phase::kWeightBackward ? kPassW : kPassB;
}

inline double PassCost(const StagePassCosts& c, int pass, int stage) {
  return pass == kPassF ? c.f[stage] : pass == kPassB ? c.b[stage] : c.w[stage];
}

inline double PassMem(const StagePassCosts& c, int pass, int stage) {
  return pass == kPassF ? c.mem_f[stage] : pass == kPassB ? c.mem_b[stage] : c.mem_w[stage];
}

}  // namespace stagecraft::schedules::zb
