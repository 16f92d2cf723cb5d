// Measured metrics, metrics file and table of executed schedules (see measured.h). The metrics
// come from schedules::ComputeMetrics on the ranks' records joined into one RunRecord, so
// measured and predicted numbers follow one definition.
#include "measured.h"

#include <algorithm>
#include <cstdint>

#include <fmt/format.h>

#include "stagecraft/base/check.h"
#include "stagecraft/base/printable.h"
#include "stagecraft/exec/runtime.h"
#include "stagecraft/sim/units.h"

namespace stagecraft::cli {

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

std::string MeasuredTable(const sim::Scenario& sc, const std::vector<MeasuredSchedule>& measured) {
  std::string out = fmt::format("{:<12} {:>13} {:>20} {:>8} {:>16} {:>12} {:>13}  {}\n", "schedule", "step time",
                                "throughput", "bubble", "peak memory", "wait (max)", "overhead/op", "loss first -> last");
  for (const MeasuredSchedule& m : measured) {
    const schedules::ScheduleMetrics& x = m.metrics;
    const schedules::ExecutorMetrics& e = *x.executor;
    const int worst = x.WorstMemoryRank();
    double wait = 0;  // blocked on a receive, wait and transfer
    for (const auto& r : x.ranks_detail) wait = std::max(wait, r.wait_ms + r.transfer_ms);
    out += fmt::format("{:<12} {:>10.3f} ms {:>10.1f} samples/s {:>7.2f}% {:>16} {:>9.1f} ms {:>10.1f} us  {:.6f} -> {:.6f}\n",
                       Printable(x.schedule), x.step_time_ms, x.throughput_samples_per_s, 100 * x.bubble_fraction,
                       sim::FormatBytes(x.ranks_detail[worst].peak_memory_bytes), wait, e.overhead_ns_per_op * 1e-3,
                       e.losses.empty() ? 0.0 : e.losses.front(), e.losses.empty() ? 0.0 : e.losses.back());
  }
  return out;
}

}  // namespace stagecraft::cli
