// Measured metrics and metrics file of executed schedules (see measure.h). The metrics
// come from schedules::ComputeMetrics on the ranks' records joined into one RunRecord, so
// measured and predicted numbers follow one definition.
#include "stagecraft/harness/measure.h"

#include <algorithm>
#include <cstdint>

#include <fmt/format.h>

#include "stagecraft/base/check.h"
#include "stagecraft/exec/runtime.h"

namespace stagecraft::harness {

schedules::RunRecord JoinRankRuns(const schedules::Schedule& s, const std::vector<std::string>& rank_runs,
                                  int64_t memory_bytes) {
  SC_CHECK(static_cast<int>(rank_runs.size()) == s.ranks(), "one run per rank");
  schedules::RunRecord result;
  result.start_ns = INT64_MAX;
  for (int r = 0; r < s.ranks(); ++r) {
    schedules::RankRecord rec = exec::ParseRankRun(rank_runs[r]).record;
    for (size_t i = 0; i < rec.ops.size(); ++i) {
      const schedules::OpTiming& t = rec.ops[i];
      if (t.start_ns < 0) continue;
      // The run starts with its first op (a receive may be posted before any compute starts)
      // and ends with its last compute or STEP op, as in the simulator.
      result.start_ns = std::min(result.start_ns, t.start_ns);
      if (!schedules::IsComm(s.ops[r][i].kind)) result.end_ns = std::max(result.end_ns, t.end_ns);
    }
    rec.oom = memory_bytes > 0 && rec.peak_memory_bytes > memory_bytes;
    result.ranks.push_back(std::move(rec));
  }
  if (result.start_ns == INT64_MAX) result.start_ns = 0;
  return result;
}

MeasuredSchedule Measure(const schedules::Schedule& s, const sim::Scenario& sc,
                         const std::vector<std::string>& rank_runs) {
  const schedules::RunRecord result = JoinRankRuns(s, rank_runs, sc.topology.device.memory_bytes);
  MeasuredSchedule m;
  m.metrics = schedules::ComputeMetrics(s, result, sc.pipeline.microbatch_size);
  m.metrics.executor = schedules::ComputeExecutorMetrics(s, result, m.metrics);
  m.trace = schedules::BuildTrace(s, result, sc.name, "measured", m.metrics);
  return m;
}

schedules::MetricsFile MeasuredFile(const sim::Scenario& sc, const std::string& backend,
                                    const std::vector<MeasuredSchedule>& measured) {
  schedules::MetricsFile file;
  file.scenario = sc.name;
  file.source = "measured";
  file.backend = backend;
  for (const MeasuredSchedule& m : measured) file.schedules.push_back(m.metrics);
  return file;
}

}  // namespace stagecraft::harness
