// The traces the viewer has open, read-only once loaded (Tracy's habit: data owned apart from
// the view). Each trace is indexed for drawing: per (rank, stream) lane its ops sorted by start,
// and its memory counters per rank. Loading never throws for a bad file: the result carries a
// one-line error the window shows instead.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "stagecraft/schedules/bubble_split.h"
#include "stagecraft/schedules/trace.h"

namespace stagecraft::viz {

// One lane: the ops of one (rank, stream), sorted by start_ns, plus a prefix maximum of their
// end times so a binary search finds the first op that can reach a time (ops may overlap on
// send/recv streams).
struct Lane {
  int rank = 0;
  schedules::Stream stream = schedules::Stream::kCompute;
  std::vector<int> ops;            // indices into Trace::ops, sorted by start_ns
  std::vector<int64_t> max_end_ns; // max_end_ns[i] = max end over ops[0..i]
};

struct LoadedTrace {
  std::string path;
  schedules::Trace trace;
  int skipped = 0;                 // events lacking a needed field or holding an unusable one
  std::string first_skipped;       // why the first was skipped: "event 12: \"dur\" is negative (-5)"
  // Ranks ascending; compute, send, recv and collective (REDUCE_GRADs, with replicas) per rank;
  // empty lanes dropped.
  std::vector<Lane> lanes;
  std::vector<std::vector<schedules::TraceCounter>> memory;  // per rank, by time
  int ranks = 0;
  std::optional<schedules::Shape> shape;  // TraceShape: the header's, else read off the ops
  int64_t start_ns = 0;            // first op start
  int64_t end_ns = 0;              // last op end
  std::vector<int64_t> step_start_ns;  // per step: the first compute op of that step to start
  std::vector<schedules::RankSplit> split;  // per rank: the bubble split with its gaps in time order
};

// Whether some rank of `trace` has ops on `stream` (the viewer adds a collective lane per rank
// only to a trace of a run with replicas).
bool HasLane(const LoadedTrace& trace, schedules::Stream stream);

struct LoadResult {
  std::shared_ptr<const LoadedTrace> trace;  // null on error
  std::string error;                         // "path: what", one line, when trace is null
};

// Reads (ReadInputFile, at most kMaxJsonBytes: a directory or /dev/zero is an error) and
// indexes a trace file.
LoadResult LoadTraceFile(const std::string& path);
// The same from text (tests, benchmarks); `path` names it in errors.
LoadResult LoadTraceText(std::string_view text, const std::string& path);

}  // namespace stagecraft::viz
