// Measured metrics and metrics file of executed schedules (see measure.h). The metrics
// come from schedules::ComputeMetrics on the ranks' records joined into one RunRecord, so
// measured and predicted numbers follow one definition.
#include "stagecraft/harness/measure.h"

#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <limits>

#include <fmt/format.h>

#include "stagecraft/base/check.h"
#include "stagecraft/exec/runtime.h"
#include "stagecraft/harness/predict.h"

namespace stagecraft::harness {
namespace {

// Moves every time of `rec` by `shift_ns` (an op that did not run keeps its -1s).
void ShiftRankRecord(int64_t shift_ns, schedules::RankRecord* rec) {
  if (shift_ns == 0) return;
  for (schedules::OpTiming& t : rec->ops) {
    if (t.start_ns >= 0) t.start_ns += shift_ns;
    if (t.end_ns >= 0) t.end_ns += shift_ns;
  }
  for (schedules::MemorySample& m : rec->memory) m.time_ns += shift_ns;
}

}  // namespace

schedules::RunRecord JoinRankRuns(const schedules::Schedule& s, const std::vector<std::string>& rank_runs,
                                  const std::vector<int64_t>& rank_memory_bytes, const std::vector<int>& rank_devices) {
  SC_CHECK(static_cast<int>(rank_runs.size()) == s.ranks(), "one run per rank");
  schedules::RunRecord result;
  std::vector<exec::RankRun> runs;
  for (const std::string& run : rank_runs) runs.push_back(exec::ParseRankRun(run));
  const auto shared = [&](const exec::RankRun& r) {
    return !r.clock_id.empty() && r.clock_id == runs.front().clock_id && r.clock_origin_ns >= 0;
  };
  int64_t origin = std::numeric_limits<int64_t>::max();
  for (const exec::RankRun& r : runs) {
    if (shared(r)) origin = std::min(origin, r.clock_origin_ns);
  }
  for (exec::RankRun& r : runs) {
    if (shared(r)) ShiftRankRecord(r.clock_origin_ns - origin, &r.record);
    result.ranks.push_back(std::move(r.record));
  }
  schedules::SumSharedDeviceMemory(rank_devices, &result);
  schedules::FinishRunRecord(s, rank_memory_bytes, &result);  // as the simulator does
  return result;
}

MeasuredSchedule Measure(const schedules::Schedule& s, const sim::Scenario& sc,
                         const std::vector<std::string>& rank_runs) {
  // Ranks sharing a device, where the simulator places them (the executor puts them there:
  // exec::GpuForLocalRank on the cuda backend, exec::CoreForLocalRank on the cpu one).
  const schedules::RunRecord result =
      JoinRankRuns(s, rank_runs, sim::RankDeviceMemories(sc),
                   sc.pipeline.ranks_per_device > 1 ? sc.pipeline.RankDevices() : std::vector<int>{});
  MeasuredSchedule m;
  m.metrics = schedules::ComputeMetrics(s, result, sc.pipeline.microbatch_size);
  m.metrics.model_tflops_per_device = ModelTflopsPerDevice(sc, s, m.metrics.step_time_ms);
  m.metrics.executor = schedules::ComputeExecutorMetrics(s, result, m.metrics);
  if (sc.training.target_loss) {
    schedules::MarkTargetLoss(*sc.training.target_loss, sc.training.loss_window, &*m.metrics.executor);
  }
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
  file.precision = std::string(sim::Name(sc.training.dtype));
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
