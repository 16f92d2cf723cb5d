// The metrics codec: the one place the metrics JSON (DESIGN.md §4, docs/executor.md "Output") is
// written and read, through RapidJSON, strictly (compare) or leniently (the viewer); numbers keep
// their fixed decimals. Traces embed the same schedule object (trace.h).
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "stagecraft/base/error.h"
#include "stagecraft/schedules/metrics.h"

namespace stagecraft::schedules {

// The file as `simulate --json` and `execute --json` write it: one line and a newline,
//   {"scenario":..,"source":..,["costs":..|"backend":..,"precision":..,]"schedules":[{schedule}...]}
// where a schedule is {"schedule","ranks","chunks","microbatches","microbatch_size","steps",
// ["data_parallel",]"makespan_ms","step_time_ms","throughput_samples_per_s" (6 decimals),
// "bubble_fraction" (9 decimals),"oom","per_rank":[{"rank","busy_ms","span_ms","compute_ms",
// "wait_ms","transfer_ms",["collective_ms",]"overhead_ms","idle_ms" (6 decimals),
// "peak_memory_bytes","peak_inflight_microbatches","peak_weight_versions","oom"}...]} and, when
// measured, "losses" (9 significant digits),"overhead_ns_per_op" (1 decimal). "data_parallel" and
// "collective_ms" are written only with more than one replica (a one-replica file stays as it
// was); read back, their absence means 1 and 0.
std::string MetricsFileToJson(const MetricsFile& file);

// One schedule object of that file, alone and without a newline, with the same keys and fixed
// decimals (`plan --json` nests one per configuration).
std::string ScheduleMetricsToJson(const ScheduleMetrics& metrics);

// Strict read (compare): required are "schedules" and, per schedule, "schedule", "ranks",
// "microbatches", "microbatch_size", "steps", "step_time_ms", "throughput_samples_per_s",
// "bubble_fraction" and "per_rank" (one entry per rank, each with "busy_ms"); every other known
// key may be absent but must have its type when present; unknown keys are ignored. Throws
// InputError "source: key.path: what", e.g. "m.json: schedules[1].step_time_ms: expected a
// number (got string)", or "source: not valid JSON (byte N): WHAT at line L, column C" (N counted
// from 1), or "source: not valid JSON: number overflow parsing '1e400'".
MetricsFile MetricsFileFromJson(std::string_view text, std::string_view source);

// Lenient read of one schedule object (a trace's summary, for the viewer): a missing or
// ill-typed field keeps its default, nothing throws. Empty when the text is not a JSON object
// or no known field could be read.
std::optional<ScheduleMetrics> ScheduleMetricsFromJsonLenient(std::string_view text);

}  // namespace stagecraft::schedules
