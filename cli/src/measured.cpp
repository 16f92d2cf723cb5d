// Measured metrics, JSON and table of executed schedules (see measured.h). The metrics come
// from sim::ComputeMetrics on an engine-shaped result, so measured and predicted numbers follow
// one definition.
#include "measured.h"

#include <algorithm>

#include <fmt/format.h>

#include "stagecraft/base/check.h"
#include "stagecraft/exec/runtime.h"
#include "stagecraft/sim/units.h"

namespace stagecraft::cli {
namespace {

std::string JsonList(const std::vector<double>& values, const char* format) {
  std::string out = "[";
  for (size_t i = 0; i < values.size(); ++i) out += (i ? "," : "") + fmt::format(fmt::runtime(format), values[i]);
  return out + "]";
}

}  // namespace

MeasuredSchedule Measure(const schedules::Schedule& s, const sim::Scenario& sc,
                         const std::vector<std::string>& rank_runs) {
  SC_CHECK(static_cast<int>(rank_runs.size()) == s.ranks(), "one run per rank");
  schedules::RunRecord result;
  result.start_ns = INT64_MAX;
  MeasuredSchedule m;
  int64_t ops = 0, overhead_ns = 0;
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
    rec.oom = sc.topology.device.memory_bytes > 0 && rec.peak_memory_bytes > sc.topology.device.memory_bytes;
    if (!rec.losses.empty()) m.losses = rec.losses;
    const int64_t rank_overhead = std::max<int64_t>(0, rec.loop_ns - rec.busy_ns - rec.wait_ns);
    m.wait_ms.push_back(rec.wait_ns * 1e-6);
    m.overhead_ms.push_back(rank_overhead * 1e-6);
    ops += static_cast<int64_t>(rec.ops.size());
    overhead_ns += rank_overhead;
    result.ranks.push_back(std::move(rec));
  }
  if (result.start_ns == INT64_MAX) result.start_ns = 0;
  m.metrics = sim::ComputeMetrics(s, result, sc.pipeline.microbatch_size);
  m.overhead_ns_per_op = ops > 0 ? static_cast<double>(overhead_ns) / ops : 0;
  m.summary_json = sim::MetricsToJson(m.metrics);
  m.summary_json.pop_back();  // reopen the object for the executor's fields
  m.summary_json += fmt::format(",\"losses\":{},\"wait_ms\":{},\"overhead_ms\":{},\"overhead_ns_per_op\":{:.1f}}}",
                                JsonList(m.losses, "{:.9g}"), JsonList(m.wait_ms, "{:.6f}"),
                                JsonList(m.overhead_ms, "{:.6f}"), m.overhead_ns_per_op);
  m.trace = sim::BuildTrace(s, result, sc.name, "measured", m.summary_json);
  return m;
}

std::string MeasuredJson(const sim::Scenario& sc, const std::string& backend,
                         const std::vector<MeasuredSchedule>& measured) {
  std::string json =
      fmt::format("{{\"scenario\":\"{}\",\"source\":\"measured\",\"backend\":\"{}\",\"schedules\":[", sc.name, backend);
  for (size_t i = 0; i < measured.size(); ++i) json += (i ? "," : "") + measured[i].summary_json;
  return json + "]}\n";
}

std::string MeasuredTable(const sim::Scenario& sc, const std::vector<MeasuredSchedule>& measured) {
  std::string out = fmt::format("{:<12} {:>13} {:>20} {:>8} {:>16} {:>12} {:>13}  {}\n", "schedule", "step time",
                                "throughput", "bubble", "peak memory", "wait (max)", "overhead/op", "loss first -> last");
  for (const MeasuredSchedule& m : measured) {
    const sim::ScheduleMetrics& x = m.metrics;
    const int worst = x.WorstMemoryRank();
    const double wait = m.wait_ms.empty() ? 0 : *std::max_element(m.wait_ms.begin(), m.wait_ms.end());
    out += fmt::format("{:<12} {:>10.3f} ms {:>10.1f} samples/s {:>7.2f}% {:>16} {:>9.1f} ms {:>10.1f} us  {:.6f} -> {:.6f}\n",
                       x.schedule, x.step_time_ms, x.throughput_samples_per_s, 100 * x.bubble_fraction,
                       sim::FormatBytes(x.ranks_detail[worst].peak_memory_bytes), wait, m.overhead_ns_per_op * 1e-3,
                       m.losses.empty() ? 0.0 : m.losses.front(), m.losses.empty() ? 0.0 : m.losses.back());
  }
  return out;
}

}  // namespace stagecraft::cli
