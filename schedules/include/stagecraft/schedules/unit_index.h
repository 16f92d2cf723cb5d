// Dense indexing of (stage, step, microbatch) units, shared by the schedule passes and the
// simulator: unit = (step * stages + stage) * microbatches + microbatch.
#pragma once

#include <cstddef>

#include "stagecraft/schedules/ir.h"

namespace stagecraft::schedules {

struct UnitIndex {
  int stages = 0, microbatches = 0, steps = 0;
  explicit UnitIndex(const Schedule& s) : stages(s.stages()), microbatches(s.microbatches), steps(s.steps) {}
  size_t size() const { return static_cast<size_t>(stages) * microbatches * steps; }
  bool InRange(const Op& op) const {
    return op.stage >= 0 && op.stage < stages && op.microbatch >= 0 && op.microbatch < microbatches &&
           op.step >= 0 && op.step < steps;
  }
  size_t operator()(int stage, int step, int microbatch) const {
    return (static_cast<size_t>(step) * stages + stage) * microbatches + microbatch;
  }
  size_t operator()(const Op& op) const { return (*this)(op.stage, op.step, op.microbatch); }
};

}  // namespace stagecraft::schedules
