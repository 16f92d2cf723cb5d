// Metrics (DESIGN.md §4) of a run record, predicted or measured, by one definition.
#include "stagecraft/schedules/metrics.h"

#include <algorithm>
#include <array>
#include <cmath>

#include <fmt/format.h>

#include "stagecraft/base/stats.h"
#include "stagecraft/schedules/bubble_split.h"

namespace stagecraft::schedules {

int ScheduleMetrics::WorstMemoryRank() const {
  int worst = 0;
  for (const RankMetrics& r : ranks_detail) {
    if (r.peak_memory_bytes > ranks_detail[worst].peak_memory_bytes) worst = r.rank;
  }
  return worst;
}

std::string ThroughputText(const ScheduleMetrics& m) {
  const double x = m.throughput_samples_per_s;
  if (!(m.step_time_ms > 0) || !(x > 0)) return "-";
  // One decimal from 10 up; below, as many as three significant digits need (at most 12: a
  // sample a year is 3e-8 samples/s).
  const int decimals = std::clamp(2 - static_cast<int>(std::floor(std::log10(x))), 1, 12);
  return fmt::format("{:.{}f}", x, decimals);
}

bool ScheduleMetrics::AnyOom() const {
  return std::any_of(ranks_detail.begin(), ranks_detail.end(), [](const RankMetrics& r) { return r.oom; });
}

const ScheduleMetrics* MetricsFile::Find(const std::string& schedule) const {
  for (const ScheduleMetrics& s : schedules) {
    if (s.schedule == schedule) return &s;
  }
  return nullptr;
}

std::vector<StageCostMetrics> MeasuredStageCosts(const Schedule& s, const RunRecord& result) {
  constexpr size_t kPasses = std::size(kStageCostFields);
  std::vector<std::array<std::vector<int64_t>, kPasses>> durations(static_cast<size_t>(s.stages()));
  for (size_t r = 0; r < s.ops.size() && r < result.ranks.size(); ++r) {
    const std::vector<OpTiming>& timings = result.ranks[r].ops;
    for (size_t i = 0; i < s.ops[r].size() && i < timings.size(); ++i) {
      const Op& op = s.ops[r][i];
      const OpTiming& t = timings[i];
      if (op.stage < 0 || op.stage >= s.stages() || t.start_ns < 0 || t.end_ns < t.start_ns) continue;
      if (const int k = CostIndex(op.kind); k >= 0) durations[op.stage][k].push_back(t.end_ns - t.start_ns);
    }
  }
  std::vector<StageCostMetrics> out(static_cast<size_t>(s.stages()));
  for (size_t st = 0; st < out.size(); ++st) {
    for (size_t k = 0; k < kPasses; ++k) {
      if (!durations[st][k].empty()) out[st].*kStageCostFields[k].field = Median(durations[st][k]) * 1e-6;
    }
  }
  return out;
}

ScheduleMetrics ComputeMetrics(const Schedule& s, const RunRecord& result, int microbatch_size,
                               const std::atomic<bool>* stop) {
  ScheduleMetrics m;
  m.schedule = s.name;
  m.ranks = s.ranks();
  m.chunks = s.shape.chunks;
  m.microbatches = s.microbatches;
  m.microbatch_size = microbatch_size;
  m.steps = s.steps;
  m.data_parallel = s.data_parallel;
  m.weight_delays = WeightDelays(s);
  m.makespan_ns = result.makespan_ns();
  m.makespan_ms = m.makespan_ns * 1e-6;
  m.step_time_ms = m.makespan_ms / s.steps;
  const double makespan_s = m.makespan_ns * 1e-9;
  const double samples = static_cast<double>(s.microbatches) * microbatch_size * s.data_parallel * s.steps;
  m.throughput_samples_per_s = makespan_s > 0 ? samples / makespan_s : 0;
  int64_t idle_ns = 0;
  const std::vector<RankSplit> split = SplitBubbles(s, result, false, stop);
  for (int r = 0; r < s.ranks(); ++r) {
    const RankRecord& rr = result.ranks[r];
    RankMetrics rm;
    rm.rank = r;
    rm.busy_ms = rr.busy_ns * 1e-6;
    rm.span_ms = rr.first_f_start_ns < 0 ? 0 : (rr.last_compute_end_ns - rr.first_f_start_ns) * 1e-6;
    rm.compute_ms = split[r].compute_ns * 1e-6;
    rm.wait_ms = split[r].wait_ns * 1e-6;
    rm.transfer_ms = split[r].transfer_ns * 1e-6;
    rm.collective_ms = split[r].collective_ns * 1e-6;
    rm.overhead_ms = split[r].overhead_ns * 1e-6;
    rm.idle_ms = split[r].idle_ns * 1e-6;
    rm.offload_wait_ms = split[r].offload_wait_ns * 1e-6;
    rm.peak_memory_bytes = rr.peak_memory_bytes;
    rm.peak_host_memory_bytes = rr.peak_host_memory_bytes;
    rm.device_peak_memory_bytes = rr.device_peak_memory_bytes;
    rm.device = rr.device;
    rm.peak_inflight_microbatches = rr.peak_inflight;
    rm.peak_weight_versions = rr.peak_weight_versions;
    rm.oom = rr.oom;
    idle_ns += m.makespan_ns - rr.busy_ns;
    m.ranks_detail.push_back(rm);
  }
  m.bubble_fraction = m.makespan_ns > 0 ? static_cast<double>(idle_ns) / (static_cast<double>(s.ranks()) * m.makespan_ns) : 0;
  return m;
}

ExecutorMetrics ComputeExecutorMetrics(const Schedule& schedule, const RunRecord& measured,
                                       const ScheduleMetrics& metrics) {
  ExecutorMetrics e;
  std::vector<int64_t> step_end(static_cast<size_t>(std::max(schedule.steps, 0)), -1);
  for (size_t r = 0; r < measured.ranks.size() && r < schedule.ops.size(); ++r) {
    for (size_t i = 0; i < schedule.ops[r].size() && i < measured.ranks[r].ops.size(); ++i) {
      const Op& op = schedule.ops[r][i];
      const OpTiming& t = measured.ranks[r].ops[i];
      if (!RunsOnCompute(op.kind)) continue;  // a step ends with its STEP, not a post or a copy
      if (t.end_ns < 0 || op.step < 0 || op.step >= schedule.steps) continue;
      step_end[op.step] = std::max(step_end[op.step], t.end_ns);
    }
  }
  int64_t previous = measured.start_ns;
  for (const int64_t end : step_end) {
    if (end < 0) break;  // a step that did not run (a failed rank's record)
    e.step_ms.push_back(static_cast<double>(end - previous) * 1e-6);
    previous = std::max(previous, end);
  }
  int64_t ops = 0;
  for (const RankRecord& rec : measured.ranks) {
    if (!rec.losses.empty()) e.losses = rec.losses;  // the rank of the last stage has them
    ops += static_cast<int64_t>(rec.ops.size());
  }
  double overhead_ms = 0;
  for (const RankMetrics& r : metrics.ranks_detail) overhead_ms += r.overhead_ms;
  e.overhead_ns_per_op = ops > 0 ? overhead_ms * 1e6 / static_cast<double>(ops) : 0;
  return e;
}

void MarkTargetLoss(double target, int window, ExecutorMetrics* e) {
  e->target_loss = target;
  e->loss_window = std::max(window, 1);
  e->target_reached_step = -1;
  e->time_to_target_ms = -1;
  const size_t w = static_cast<size_t>(e->loss_window);
  double sum = 0, elapsed = 0;
  for (size_t k = 0; k < e->losses.size(); ++k) {
    sum += e->losses[k];
    if (k >= w) sum -= e->losses[k - w];
    if (k < e->step_ms.size()) elapsed += e->step_ms[k];
    if (k + 1 < w || sum / static_cast<double>(w) > target) continue;
    if (k >= e->step_ms.size()) return;  // no time for the step: not a run that reached it
    e->target_reached_step = static_cast<int>(k);
    e->time_to_target_ms = elapsed;
    return;
  }
}

std::string TargetText(const ExecutorMetrics& e) {
  if (!e.target_loss) return "";
  if (e.target_reached_step < 0) return fmt::format("not reached in {} step(s)", e.losses.size());
  return fmt::format("{:.3f} ms at step {}", e.time_to_target_ms, e.target_reached_step + 1);
}

ErrorSplit SplitError(const ScheduleMetrics& predicted, const ScheduleMetrics& replay, const ScheduleMetrics& measured) {
  ErrorSplit e;
  const double step = measured.step_time_ms > 0 ? measured.step_time_ms : 1;  // the readers refuse 0
  e.cost_drift_pct = 100 * (predicted.step_time_ms - replay.step_time_ms) / step;
  e.model_error_pct = 100 * (replay.step_time_ms - measured.step_time_ms) / step;
  e.cost_drift_pp = ErrorPp(predicted.bubble_fraction, replay.bubble_fraction);
  e.model_error_pp = ErrorPp(replay.bubble_fraction, measured.bubble_fraction);
  e.replay_step_ms = replay.step_time_ms;
  e.replay_bubble = replay.bubble_fraction;
  return e;
}

}  // namespace stagecraft::schedules
