// Trace files (DESIGN.md §6): Chrome trace-event JSON (Perfetto, chrome://tracing). Complete events
// carry the ops, counter events memory per rank; the top-level "stagecraft" object says predicted
// or measured, states the schedule's shape (ranks, chunks, placement) and carries its metrics.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "stagecraft/base/error.h"
#include "stagecraft/schedules/ir.h"
#include "stagecraft/schedules/metrics.h"
#include "stagecraft/schedules/run_record.h"

namespace stagecraft::schedules {

// tid of a trace event: the op's Stream (op_kinds.h). kCollective carries the REDUCE_GRADs
// (post -> completion) of a run with replicas; a one-replica trace has no such stream.

struct TraceOp {
  int rank = 0;
  Stream stream = Stream::kCompute;
  Op op;             // kind, stage, microbatch, step, version, peer
  int op_index = 0;  // position in the rank's IR list: predicted and measured match on it
  int64_t start_ns = 0;
  int64_t duration_ns = 0;
};

struct TraceCounter {
  int rank = 0;
  int64_t time_ns = 0;
  int64_t memory_bytes = 0;
};

struct Trace {
  std::string source;     // "predicted" | "measured"
  // A predicted trace's cost model, as its metrics file's `costs` ("replay:TRACE" for a replay of
  // a measured run); empty when not stated (a measured trace, an older file).
  std::string costs;
  std::string scenario;   // scenario name
  std::string schedule;   // schedule name
  int microbatches = 1;   // per step, to print action strings
  // The schedule's shape as the header states it ("ranks", "chunks", "placement"); empty for a
  // trace written without one (an older file, a foreign one): TraceShape reads it off the ops.
  std::optional<Shape> shape;
  // The schedule's metrics (DESIGN.md §4), written by the metrics codec; read leniently, and
  // empty when the trace has no summary or none of its fields could be read.
  std::optional<ScheduleMetrics> summary;
  std::vector<TraceOp> ops;
  std::vector<TraceCounter> counters;
  // A multi-model workload's trace (harness/workload.h): the tasks' names. Each "rank" is then a
  // device, each op one turn of a task on it: its microbatch the task's index here, its stage the
  // shard, F a forward turn, B a backward one (or a task's whole run). Empty for a schedule's trace.
  std::vector<std::string> tasks;
};

// The device `rank` shares with other ranks, as the trace's summary states it
// (RankMetrics::device); -1 when it has its own or the trace has no summary.
int SharedDeviceOf(const Trace& trace, int rank);

// The trace of a timed schedule: compute ops on stream 0, SENDs (transfer start -> arrival) on
// stream 1, RECVs (post -> arrival) on stream 2, REDUCE_GRADs (start -> completion) on stream 3,
// OFFLOADs on stream 4 and RELOADs on stream 5 (start -> completion), memory samples as counters;
// times relative to the record's start.
Trace BuildTrace(const Schedule& schedule, const RunRecord& result, const std::string& scenario,
                 const std::string& source, std::optional<ScheduleMetrics> summary);

// The trace's shape: the one its header states, else the one its ops fit (ranks up to the
// highest pid, stages up to the highest stage, a whole number per rank, every op's stage on its
// rank under loop placement, else under v); empty when there are no ops or none fits.
std::optional<Shape> TraceShape(const Trace& trace);

// Serializes to Chrome trace JSON, one event per line. Times are written in microseconds with
// 3 decimals so nanoseconds survive a round trip. Every rank's threads are named; the collective
// and copy streams only when some op is on them, so a trace without them reads as before. A
// copy's event names its tensor in args ("tensor": "activations").
std::string TraceToJson(const Trace& trace);

// Parses a trace. Throws InputError "source: what" for text that is not a trace (not JSON,
// no traceEvents, a "stagecraft" header field of the wrong type, a stated shape that an op does
// not fit: "t.json: stagecraft: placement v puts stage 5 on rank 2, but an op of it ran on rank 1"). Events with unknown fields
// are accepted (fields ignored); complete events and memory counters that lack a needed field,
// or hold one with a wrong type or value (a negative "dur", a "ts" that is not a number, a
// "tid" that is no stream, 0 to 5; a copy without its "tensor", another op with one), are skipped and counted in `skipped` (a foreign trace's own events
// lack stagecraft's fields), and the first of them is described in `first_skipped`. The
// summary is read leniently (metrics_json.h).
struct TraceReadResult {
  Trace trace;
  int skipped = 0;
  // "event N: WHY" for the first skipped event, N its 0-based position in traceEvents and WHY
  // its first field (in the order ph, name, pid, tid, ts, dur, args, kind, stage, microbatch,
  // step, version, peer, op_index, bytes, tensor) that is missing or unusable: "\"dur\" is negative
  // (-5)", "\"ts\" is not a number (\"12\")", "\"kind\" is missing". Empty when none was skipped.
  std::string first_skipped;
};
TraceReadResult TraceFromJson(std::string_view text, std::string_view source);

}  // namespace stagecraft::schedules
