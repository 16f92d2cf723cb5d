// Metrics of one simulated (or measured) schedule, with the definitions of DESIGN.md §4,
// and the conversion of a timed schedule into a trace (DESIGN.md §6).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "stagecraft/schedules/ir.h"
#include "stagecraft/schedules/trace.h"
#include "stagecraft/sim/engine.h"

namespace stagecraft::sim {

struct RankMetrics {
  int rank = 0;
  double busy_ms = 0;
  double span_ms = 0;  // first F start to last compute end on this rank
  int64_t peak_memory_bytes = 0;
  int peak_inflight_microbatches = 0;
  int peak_weight_versions = 0;
  bool oom = false;
};

struct ScheduleMetrics {
  std::string schedule;
  int ranks = 0, chunks = 1, microbatches = 0, microbatch_size = 1, steps = 1;
  int64_t makespan_ns = 0;
  double makespan_ms = 0;     // first op start to last op end, all ranks, whole run
  double step_time_ms = 0;    // makespan / steps
  double throughput_samples_per_s = 0;  // microbatches x microbatch_size x steps / makespan
  double bubble_fraction = 0;           // idle compute time / (ranks x makespan)
  std::vector<RankMetrics> ranks_detail;

  int WorstMemoryRank() const;
  bool AnyOom() const;
};

ScheduleMetrics ComputeMetrics(const schedules::Schedule& schedule, const RunRecord& result, int microbatch_size);

// One schedule's metrics as a JSON object (compact, fixed key order, deterministic).
std::string MetricsToJson(const ScheduleMetrics& metrics);

// The trace of a timed schedule: compute ops on stream 0, SENDs (transfer start -> arrival) on
// stream 1, RECVs (post -> arrival) on stream 2, memory samples as counters.
schedules::Trace BuildTrace(const schedules::Schedule& schedule, const RunRecord& result, const std::string& scenario,
                            const std::string& source, const std::string& summary_json);

}  // namespace stagecraft::sim
