// A prediction held against a measurement (`stagecraft compare`): the metrics JSON of `simulate
// --json` beside that of `execute --json`, schedule by schedule, as signed relative errors
// (predicted − measured) / measured, with the report compare prints and the JSON `compare --json`
// writes. The command and the Python module both call it.
#pragma once

#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "stagecraft/schedules/metrics.h"

namespace stagecraft::harness {

// A metrics file as the codec reads it strictly (metrics_json.h), and the path it came from.
struct RunFile : schedules::MetricsFile {
  std::string path;
};

// Reads `path` (at most kMaxJsonBytes). Throws InputError for a file that is not a metrics file.
RunFile ReadRunFile(const std::string& path);
// The same from text already read; `path` names it in errors.
RunFile RunFileFromJson(std::string_view text, const std::string& path);
// Throws InputError naming the first schedule whose step_time_ms is not > 0: what a measured run
// needs, errors being relative to its step time (a prediction may be 0 ms: a zero-cost scenario).
void CheckStepTimes(const RunFile& file);

struct CompareOptions {
  double max_error_pct = -1;  // a step-time error beyond this is "exceeded"; negative: no limit
  // The measured traces: one trace file (a one-schedule run's, or one schedule's file of several),
  // or the name execute --trace was given, beside which it wrote one per schedule (TracePath).
  // Each schedule with a trace is replayed from its own op times to split its error into cost
  // drift and model error; every trace must be usable in full (ReadTraceInFull, RecordOf), and
  // under a name that is no file, every schedule in both files must have its own. Empty: none.
  std::string trace_path;
  // Called once, before anything is compared, with the one line (no newline) that says the
  // measured run is partial; null: not told.
  std::function<void(const std::string&)> warn;
};

struct Comparison {
  std::string text;  // the report as compare prints it
  std::string json;  // as compare --json writes it, with its newline
  std::string worst;            // the schedule with the largest |step-time error|
  double worst_error_pct = 0;
  std::vector<std::string> exceeded;  // the schedules over max_error_pct, in report order
};

// Throws InputError when `predicted` is a partial run, when both name one file, when they are
// swapped (a measured run first, a prediction second), when `measured` fails CheckStepTimes,
// when the files have no schedule in common, when a schedule in both has another number of
// ranks in one than in the other, or when a trace of options.trace_path cannot be used in full.
Comparison CompareRuns(const RunFile& predicted, const RunFile& measured, const CompareOptions& options);

}  // namespace stagecraft::harness
