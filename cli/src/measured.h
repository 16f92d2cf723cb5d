// Turning the ranks' measurements of one executed schedule into the simulator's metrics
// (DESIGN.md §4, same definitions), a measured trace (§6) and the execute command's JSON and
// table.
#pragma once

#include <string>
#include <vector>

#include "stagecraft/schedules/ir.h"
#include "stagecraft/schedules/trace.h"
#include "stagecraft/sim/metrics.h"
#include "stagecraft/sim/scenario.h"

namespace stagecraft::cli {

struct MeasuredSchedule {
  sim::ScheduleMetrics metrics;
  std::vector<double> losses;        // mean per step
  std::vector<double> wait_ms;       // per rank: blocked on receives
  std::vector<double> overhead_ms;   // per rank: loop time neither computing nor waiting
  double overhead_ns_per_op = 0;     // over all ranks and ops
  std::string summary_json;          // metrics + the executor's extra fields
  schedules::Trace trace;
};

// `rank_runs`: every rank's SerializeRankRun, in rank order.
MeasuredSchedule Measure(const schedules::Schedule& schedule, const sim::Scenario& scenario,
                         const std::vector<std::string>& rank_runs);

// {"scenario":..,"source":"measured","backend":..,"schedules":[summary_json...]}
std::string MeasuredJson(const sim::Scenario& scenario, const std::string& backend,
                         const std::vector<MeasuredSchedule>& measured);

std::string MeasuredTable(const sim::Scenario& scenario, const std::vector<MeasuredSchedule>& measured);

}  // namespace stagecraft::cli
