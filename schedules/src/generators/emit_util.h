// Small helpers shared by the generator files (private to schedules/src).
#pragma once

#include <vector>

#include "stagecraft/schedules/ir.h"

namespace stagecraft::schedules::detail {

inline Op Compute(OpKind kind, int stage, int microbatch, int step) { return Op{kind, stage, microbatch, step}; }

// Appends `from` to `to` (used to concatenate the per-step orders of flush schedules).
inline void Append(std::vector<Op>* to, const std::vector<Op>& from) { to->insert(to->end(), from.begin(), from.end()); }

}  // namespace stagecraft::schedules::detail
