// Metrics (DESIGN.md §4) and trace building from an engine result.
#include "stagecraft/sim/metrics.h"

#include <algorithm>

#include <fmt/format.h>

namespace stagecraft::sim {

using schedules::OpKind;

int ScheduleMetrics::WorstMemoryRank() const {
  int worst = 0;
  for (const RankMetrics& r : ranks_detail) {
    if (r.peak_memory_bytes > ranks_detail[worst].peak_memory_bytes) worst = r.rank;
  }
  return worst;
}

bool ScheduleMetrics::AnyOom() const {
  return std::any_of(ranks_detail.begin(), ranks_detail.end(), [](const RankMetrics& r) { return r.oom; });
}

ScheduleMetrics ComputeMetrics(const schedules::Schedule& s, const RunRecord& result, int microbatch_size) {
  ScheduleMetrics m;
  m.schedule = s.name;
  m.ranks = s.ranks();
  m.chunks = s.shape.chunks;
  m.microbatches = s.microbatches;
  m.microbatch_size = microbatch_size;
  m.steps = s.steps;
  m.makespan_ns = result.makespan_ns();
  m.makespan_ms = m.makespan_ns * 1e-6;
  m.step_time_ms = m.makespan_ms / s.steps;
  const double makespan_s = m.makespan_ns * 1e-9;
  m.throughput_samples_per_s =
      makespan_s > 0 ? static_cast<double>(s.microbatches) * microbatch_size * s.steps / makespan_s : 0;
  int64_t idle_ns = 0;
  for (int r = 0; r < s.ranks(); ++r) {
    const RankRecord& rr = result.ranks[r];
    RankMetrics rm;
    rm.rank = r;
    rm.busy_ms = rr.busy_ns * 1e-6;
    rm.span_ms = rr.first_f_start_ns < 0 ? 0 : (rr.last_compute_end_ns - rr.first_f_start_ns) * 1e-6;
    rm.peak_memory_bytes = rr.peak_memory_bytes;
    rm.peak_inflight_microbatches = rr.peak_inflight;
    rm.peak_weight_versions = rr.peak_weight_versions;
    rm.oom = rr.oom;
    idle_ns += m.makespan_ns - rr.busy_ns;
    m.ranks_detail.push_back(rm);
  }
  m.bubble_fraction = m.makespan_ns > 0 ? static_cast<double>(idle_ns) / (static_cast<double>(s.ranks()) * m.makespan_ns) : 0;
  return m;
}

std::string MetricsToJson(const ScheduleMetrics& m) {
  std::string out = fmt::format(
      "{{\"schedule\":\"{}\",\"ranks\":{},\"chunks\":{},\"microbatches\":{},\"microbatch_size\":{},\"steps\":{},"
      "\"makespan_ms\":{:.6f},\"step_time_ms\":{:.6f},\"throughput_samples_per_s\":{:.6f},\"bubble_fraction\":{:.9f},"
      "\"oom\":{},\"per_rank\":[",
      m.schedule, m.ranks, m.chunks, m.microbatches, m.microbatch_size, m.steps, m.makespan_ms, m.step_time_ms,
      m.throughput_samples_per_s, m.bubble_fraction, m.AnyOom());
  for (size_t i = 0; i < m.ranks_detail.size(); ++i) {
    const RankMetrics& r = m.ranks_detail[i];
    out += fmt::format(
        "{}{{\"rank\":{},\"busy_ms\":{:.6f},\"span_ms\":{:.6f},\"peak_memory_bytes\":{},"
        "\"peak_inflight_microbatches\":{},\"peak_weight_versions\":{},\"oom\":{}}}",
        i ? "," : "", r.rank, r.busy_ms, r.span_ms, r.peak_memory_bytes, r.peak_inflight_microbatches,
        r.peak_weight_versions, r.oom);
  }
  return out + "]}";
}

schedules::Trace BuildTrace(const schedules::Schedule& s, const RunRecord& result, const std::string& scenario,
                            const std::string& source, const std::string& summary_json) {
  schedules::Trace trace;
  trace.source = source;
  trace.scenario = scenario;
  trace.schedule = s.name;
  trace.microbatches = s.microbatches;
  trace.summary_json = summary_json;
  for (int r = 0; r < s.ranks(); ++r) {
    for (size_t i = 0; i < s.ops[r].size(); ++i) {
      const schedules::Op& op = s.ops[r][i];
      const OpTiming& t = result.ranks[r].ops[i];
      if (t.start_ns < 0 || t.end_ns < t.start_ns) continue;
      schedules::TraceOp ev;
      ev.rank = r;
      ev.op = op;
      ev.op_index = static_cast<int>(i);
      ev.start_ns = t.start_ns - result.start_ns;
      ev.duration_ns = t.end_ns - t.start_ns;
      if (op.kind == OpKind::kSendF || op.kind == OpKind::kSendB) ev.stream = schedules::Stream::kSend;
      else if (op.kind == OpKind::kRecvF || op.kind == OpKind::kRecvB) ev.stream = schedules::Stream::kRecv;
      trace.ops.push_back(ev);
    }
    for (const MemorySample& m : result.ranks[r].memory) {
      trace.counters.push_back({r, std::max<int64_t>(0, m.time_ns - result.start_ns), m.bytes});
    }
  }
  return trace;
}

}  // namespace stagecraft::sim
