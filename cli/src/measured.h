// Turning the ranks' measurements of one executed schedule into the metrics (DESIGN.md §4, the
// simulator's definitions, plus the executor's own fields), a measured trace (§6), and the
// execute command's metrics file and table.
#pragma once

#include <string>
#include <vector>

#include "stagecraft/schedules/ir.h"
#include "stagecraft/schedules/metrics.h"
#include "stagecraft/schedules/trace.h"
#include "stagecraft/sim/scenario.h"

namespace stagecraft::cli {

struct MeasuredSchedule {
  schedules::ScheduleMetrics metrics;  // with `executor` set
  schedules::Trace trace;
};

// `rank_runs`: every rank's SerializeRankRun, in rank order.
MeasuredSchedule Measure(const schedules::Schedule& schedule, const sim::Scenario& scenario,
                         const std::vector<std::string>& rank_runs);

// The metrics file of `execute --json` (source "measured", with the backend).
schedules::MetricsFile MeasuredFile(const sim::Scenario& scenario, const std::string& backend,
                                    const std::vector<MeasuredSchedule>& measured);

std::string MeasuredTable(const sim::Scenario& scenario, const std::vector<MeasuredSchedule>& measured);

}  // namespace stagecraft::cli
