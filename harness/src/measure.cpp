// Measured metrics and metrics file of executed schedules (see measure.h). The metrics
// come from schedules::ComputeMetrics on the ranks' records joined into one RunRecord, so
// measured and predicted numbers follow one definition.
#include "stagecraft/harness/measure.h"

#include <algorithm>
#include <cstdint>
#include <filesystem>

#include <fmt/format.h>

#include "stagecraft/base/check.h"
#include "stagecraft/exec/runtime.h"

namespace stagecraft::harness {

schedules::RunRecord JoinRankRuns(const schedules::Schedule& s, const std::vector<std::string>& rank_runs,
                                  int64_t memory_bytes) {
  SC_CHECK(static_cast<int>(rank_runs.size()) == s.ranks(), "one run per rank");
  schedules::RunRecord result;
  for (const std::string& run : rank_runs) result.ranks.push_back(exec::ParseRankRun(run).record);
  schedules::FinishRunRecord(s, memory_bytes, &result);  // as the simulator does
  return result;
}

MeasuredSchedule Measure(const schedules::Schedule& s, const sim::Scenario& sc,
                         const std::vector<std::string>& rank_runs) {
  const schedules::RunRecord result = JoinRankRuns(s, rank_runs, sc.topology.device.memory_bytes);
  MeasuredSchedule m;
  m.metrics = schedules::ComputeMetrics(s, result, sc.pipeline.microbatch_size);
  m.metrics.executor = schedules::ComputeExecutorMetrics(s, result, m.metrics);
  m.metrics.stage_costs = schedules::MeasuredStageCosts(s, result);
  m.trace = schedules::BuildTrace(s, result, sc.name, "measured", m.metrics);
  return m;
}

schedules::MetricsFile MeasuredFile(const sim::Scenario& sc, const std::string& backend,
                                    const std::vector<MeasuredSchedule>& measured) {
  schedules::MetricsFile file;
  file.scenario = sc.name;
  file.source = "measured";
  file.backend = backend;
  // What ran, for `stagecraft replay` (a scenario built in code has no file).
  if (!sc.path.empty()) {
    std::error_code ec;
    const std::filesystem::path absolute = std::filesystem::absolute(sc.path, ec);
    file.scenario_file = ec ? sc.path : absolute.lexically_normal().string();
    file.overrides = sc.overrides;
  }
  for (const MeasuredSchedule& m : measured) file.schedules.push_back(m.metrics);
  return file;
}

}  // namespace stagecraft::harness
