// A trace used in full (`replay`, `compare --trace`): every event of it read, and every compute op
// of the schedule that ran in it, so that a replay "op for op" is one. The viewer reads traces
// leniently instead (trace.h).
#pragma once

#include <string_view>

#include "stagecraft/schedules/ir.h"
#include "stagecraft/schedules/trace.h"

namespace stagecraft::schedules {

// TraceFromJson, refusing what the lenient read skips: throws InputError "SOURCE: event N: WHY"
// for the first event it could not use ("t.json: event 12: \"dur\" is negative (-5)").
Trace TraceFromJsonInFull(std::string_view text, std::string_view source);

// Checks that `trace` records a run of `schedule` op for op (REDUCE_GRADs' own lane aside): each
// traced op is the schedule's op at its rank and op_index, none is there twice, and every compute
// op (F, B, I, W) of the schedule is there. Throws InputError naming `source` and the first op
// that fails, in the trace's order for a stray op and in rank then index order for a missing one.
void CheckTraceOfSchedule(const Schedule& schedule, const Trace& trace, std::string_view source);

}  // namespace stagecraft::schedules
