// The files compare reads (compare.cpp): the measured traces that split its errors.
#pragma once

#include <string>
#include <vector>

#include "stagecraft/harness/compare.h"
#include "stagecraft/schedules/trace.h"

namespace stagecraft::harness::detail {

// A measured trace as compare --trace reads it, and the file it came from.
struct TraceFile {
  std::string path;
  schedules::Trace trace;
};

// The measured traces `path` names, each read in full (ReadTraceInFull): the one trace there when
// `path` is a file (the trace of a one-schedule run, or one schedule's file of several), else
// the traces execute --trace PATH wrote beside it (TracePath), one for every schedule in both
// files, each of which must be there. A trace of a schedule not in both files is refused.
std::vector<TraceFile> MeasuredTraces(const std::string& path, const RunFile& predicted, const RunFile& measured);

}  // namespace stagecraft::harness::detail
