// The bubble split into its causes (docs/accuracy.md, "Where the time goes"): one rank's part of a run's
// makespan is compute plus five kinds of not computing, told apart by the timing of the
// transfer that fed the next compute op (or, before a STEP, of its REDUCE_GRAD). One definition for the simulator's prediction, the
// executor's measurement (both through ComputeMetrics) and the viewer's bubble view (from a
// trace), so the three agree by construction.
#pragma once

#include <atomic>
#include <cstdint>
#include <vector>

#include "stagecraft/schedules/ir.h"
#include "stagecraft/schedules/run_record.h"
#include "stagecraft/schedules/trace.h"

namespace stagecraft::schedules {

enum class GapCause : uint8_t {
  kWait,      // the next op's input had not been sent yet (its producer was still busy)
  kTransfer,  // the input was in flight
  kOverhead,  // runtime work between ops: the input was there (or none was needed)
  kIdle,      // before the rank's first compute op and after its last
  // A STEP waiting for its REDUCE_GRAD (the data-parallel all-reduce of its gradients) to
  // complete, or a compute op for the ALL_TO_ALLs before it in its rank's list. Last, so the
  // older causes keep their values.
  kCollective,
  // A compute op or STEP waiting for the RELOAD (tensors.h CopyWaits) that brings back what it
  // reads from host memory.
  kOffloadWait,
};

struct GapInterval {
  int64_t start_ns = 0, end_ns = 0;
  GapCause cause = GapCause::kIdle;
};

// compute + wait + transfer + collective + offload wait + overhead + idle = the run's makespan, on every rank.
// Compute is F, B, I, W and STEP; a REDUCE_GRAD only posts the collective, so it is not.
struct RankSplit {
  int64_t compute_ns = 0, wait_ns = 0, transfer_ns = 0, collective_ns = 0, overhead_ns = 0, idle_ns = 0;
  int64_t offload_wait_ns = 0;
  std::vector<GapInterval> gaps;  // in time order, when asked for
};

// One op as it ran, with OpTiming's meaning of start and end (run_record.h).
struct TimedOp {
  Op op;
  int64_t start_ns = -1, end_ns = -1;
};

// Splits [run_start_ns, run_end_ns] for every rank. `ranks[r]` holds rank r's ops in IR
// order, compute, SEND/RECV and REDUCE_GRAD; a compute op's cross-rank input is matched with its RECV on
// the same rank and its SEND on the producer's (edges.h). The transfer starts at the later of
// the SEND's start and the RECV's post and ends at the RECV's end (arrival). A gap before a
// compute op is wait up to the transfer's start, transfer until its arrival, overhead after.
// With replicas, the gap before a STEP whose REDUCE_GRAD (same rank, stage and version) ends
// after the gap starts is collective up to the earlier of that end and the STEP's start; the
// rest of the gap follows the rule above. So is the gap up to the end of the ALL_TO_ALLs between
// the previous compute op and this one in the list (expert parallelism), first.
// `stop`, when set by another thread, ends it early: it throws StopRequested (base/stop.h).
std::vector<RankSplit> SplitBubbles(const Shape& shape, const std::vector<std::vector<TimedOp>>& ranks,
                                    int64_t run_start_ns, int64_t run_end_ns, bool keep_gaps,
                                    const std::atomic<bool>* stop = nullptr);

// The same for a run record of `schedule` (lowered), over the record's makespan.
std::vector<RankSplit> SplitBubbles(const Schedule& schedule, const RunRecord& record, bool keep_gaps,
                                    const std::atomic<bool>* stop = nullptr);

// The same for a trace (the viewer), from the first op's start to the last compute op's end,
// one entry per rank up to the highest rank in it, under the trace's shape (TraceShape: its
// header's, else read off its ops); a trace without one gets every gap as overhead.
std::vector<RankSplit> SplitBubbles(const Trace& trace, bool keep_gaps);

}  // namespace stagecraft::schedules
