// Turning the ranks' measurements of one executed schedule into the metrics (DESIGN.md §4, the
// simulator's definitions, plus the executor's own fields), a measured trace (§6), and the
// execute command's metrics file.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "stagecraft/schedules/ir.h"
#include "stagecraft/schedules/metrics.h"
#include "stagecraft/schedules/run_record.h"
#include "stagecraft/schedules/trace.h"
#include "stagecraft/scenario/scenario.h"

namespace stagecraft::harness {

struct MeasuredSchedule {
  schedules::ScheduleMetrics metrics;  // with `executor` set
  schedules::Trace trace;
};

// The ranks' records of one run joined into one RunRecord over the run's span (its first op to
// its last compute op or STEP, as in the simulator). `rank_runs`: every rank's
// SerializeRankRun, in rank order; a rank above its device memory (`rank_memory_bytes[r]`, when
// the list is not empty and the entry not 0) is marked OOM.
// The ranks that read rank 0's clock (the same RankRun::clock_id) are put on one origin, the
// earliest of their clock starts, so that a rank that left the set-up late does not see its
// inputs arrive before they were sent; ranks on other machines keep the set-up's alignment.
// `rank_devices` (sim::PipelineSpec::RankDevices where ranks share devices, else empty): the
// ranks of one device name it and get their memory's sum (schedules::SumSharedDeviceMemory),
// which OOM is judged on.
schedules::RunRecord JoinRankRuns(const schedules::Schedule& schedule, const std::vector<std::string>& rank_runs,
                                  const std::vector<int64_t>& rank_memory_bytes,
                                  const std::vector<int>& rank_devices = {});

// `rank_runs`: every rank's SerializeRankRun, in rank order.
MeasuredSchedule Measure(const schedules::Schedule& schedule, const sim::Scenario& scenario,
                         const std::vector<std::string>& rank_runs);

// The metrics file of `execute --json` (source "measured", with the backend).
schedules::MetricsFile MeasuredFile(const sim::Scenario& scenario, const std::string& backend,
                                    const std::vector<MeasuredSchedule>& measured);

}  // namespace stagecraft::harness
