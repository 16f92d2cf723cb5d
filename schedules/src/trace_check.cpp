// TraceFromJsonInFull and CheckTraceOfSchedule (trace_check.h): a trace that replay and compare
// --trace can use in full, or one line on the first thing that stops them.
#include "stagecraft/schedules/trace_check.h"

#include <cstdint>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "stagecraft/base/error.h"
#include "stagecraft/base/printable.h"

namespace stagecraft::schedules {
namespace {

// "rank 1 op 7 (B of stage 1, microbatch 3, step 0)"
std::string OpText(int rank, int op_index, const Op& op) {
  return fmt::format("rank {} op {} ({} of stage {}, microbatch {}, step {})", rank, op_index, KindName(op.kind),
                     op.stage, op.microbatch, op.step);
}

}  // namespace

Trace TraceFromJsonInFull(std::string_view text, std::string_view source) {
  TraceReadResult read = TraceFromJson(text, source);
  if (read.skipped > 0) {
    throw InputError(fmt::format("{}: {}{}", source, read.first_skipped,
                                 read.skipped > 1 ? fmt::format(" (and {} more unusable event(s))", read.skipped - 1)
                                                  : ""));
  }
  return std::move(read.trace);
}

void CheckTraceOfSchedule(const Schedule& schedule, const Trace& trace, std::string_view source) {
  const std::string name = Printable(schedule.name);
  std::vector<std::vector<bool>> seen(schedule.ops.size());
  for (size_t r = 0; r < schedule.ops.size(); ++r) seen[r].assign(schedule.ops[r].size(), false);
  for (const TraceOp& op : trace.ops) {
    if (op.stream == Stream::kCollective) continue;  // a REDUCE_GRAD's own lane
    const bool fits = op.rank >= 0 && op.rank < schedule.ranks() && op.op_index >= 0 &&
                      op.op_index < static_cast<int>(schedule.ops[op.rank].size());
    const Op* ir = fits ? &schedule.ops[op.rank][op.op_index] : nullptr;
    if (ir == nullptr || ir->kind != op.op.kind || ir->stage != op.op.stage || ir->microbatch != op.op.microbatch ||
        ir->step != op.op.step) {
      throw InputError(fmt::format("{}: {} is not {}'s op at that index: the trace is not of this schedule as the "
                                   "scenario lowers it",
                                   source, OpText(op.rank, op.op_index, op.op), name));
    }
    if (seen[op.rank][op.op_index]) {
      throw InputError(fmt::format("{}: {} appears twice", source, OpText(op.rank, op.op_index, op.op)));
    }
    seen[op.rank][op.op_index] = true;
  }
  int64_t missing = 0;
  std::string first;
  for (size_t r = 0; r < schedule.ops.size(); ++r) {
    for (size_t i = 0; i < schedule.ops[r].size(); ++i) {
      if (seen[r][i] || !IsCompute(schedule.ops[r][i].kind)) continue;
      if (missing++ == 0) first = OpText(static_cast<int>(r), static_cast<int>(i), schedule.ops[r][i]);
    }
  }
  if (missing == 0) return;
  if (trace.ops.empty()) {
    throw InputError(fmt::format("{}: no op in traceEvents: a trace of {} holds its {} compute ops", source, name,
                                 missing));
  }
  throw InputError(fmt::format("{}: {} of {} is not in the trace{}: a replay needs every compute op of the run", source,
                               first, name, missing > 1 ? fmt::format(" (nor {} more)", missing - 1) : ""));
}

}  // namespace stagecraft::schedules
