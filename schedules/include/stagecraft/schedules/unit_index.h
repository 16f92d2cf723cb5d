// Dense indexing of (stage, step, microbatch) units, shared by the schedule passes and the
// simulator: unit = (step * stages + stage) * microbatches + microbatch.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

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

// The most units a schedule may span: the generators' limit (4 ops per unit, 2^31 ops),
// applied to schedules read from files too.
inline constexpr int64_t kMaxUnits = int64_t{1} << 29;
// The most units a schedule read from a file may leave without their forward op. The passes
// size their tables by the units, so beyond this a few stray indices ("0F300000000" alone)
// would cost gigabytes; such a file is not the schedule its indices claim anyway (a valid one
// has one F per unit).
inline constexpr int64_t kMaxUnitsWithoutForward = int64_t{1} << 16;

// Whether a schedule read from `source` with these dimensions (each >= 1, stages = ranks x
// chunks) and `forwards` F ops can be indexed: "" when it can, else the error message, which
// starts with `source`.
std::string CheckUnitSpace(std::string_view source, int64_t stages, int64_t microbatches, int64_t steps,
                           int64_t forwards);

}  // namespace stagecraft::schedules
