// How long a run can last in simulated time, bounded before the event loop runs (limits.h): the
// sum of every op's time on its stream (with the runtime's overhead after it and its input copy)
// and of every transfer's time alone on its route (latency + bytes / its slowest link). The
// makespan never exceeds that sum: until the run ends, some stream is busy, some transfer waits
// out its latency, or transfers move data, and k transfers sharing links each get at least 1/k
// of their route's bandwidth, so together they progress at least as fast as one alone. With the
// sum at most kMaxRunNs (1 year), every time the engine computes fits int64 many times over.
#pragma once

#include <string>

#include "stagecraft/schedules/generators.h"
#include "stagecraft/schedules/ir.h"
#include "stagecraft/sim/cost_table.h"
#include <vector>

#include "stagecraft/sim/topology.h"

namespace stagecraft::sim {

struct RunBound {
  double compute_ns = 0;   // ops on the compute streams, with overheads and input copies
  double transfer_ns = 0;  // transfers, each alone on its route
  double total_ns() const { return compute_ns + transfer_ns; }
};

// The bound of a lowered schedule, op by op, with each op's own time factor (op_time_cv).
// Throws InputError when a transfer alone would take more than kMaxOpNs.
// Pipeline rank r runs on topology device rank_devices[r] (empty: device r), as in SimConfig.
RunBound BoundRun(const schedules::Schedule& schedule, const CostTable& costs, const Topology& topology,
                  const std::vector<int>& rank_devices = {});

// Throws InputError "SCHEDULE could run for up to X s of simulated time (...), above the limit
// of 1 year" when BoundRun's total, plus `collective_ns` (the REDUCE_GRADs each alone,
// CollectivePlans::AloneNs), is above kMaxRunNs. Simulate calls it first.
void CheckRunBound(const schedules::Schedule& schedule, const CostTable& costs, const Topology& topology,
                   const std::vector<int>& rank_devices = {}, double collective_ns = 0);

// The same sum for a generator's schedule before it is built, from its counts of units, STEPs
// and stage boundaries: each unit's backward at the larger of B and I + W, op times at their mean
// (op_time_cv). `costs` are for the schedule's shape; `path` names the scenario in errors. Throws
// InputError when a transfer between neighbouring stages would take over kMaxOpNs alone. The
// scenario's check (validate.h) holds it against kMaxRunNs.
struct CountBound {
  double total_ns = 0;
  double longest_unit_ns = 0;  // one unit's F + backward, the longest stage
  int longest_stage = 0;
};
CountBound BoundFromCounts(const schedules::GeneratorInfo& info, const schedules::GeneratorParams& params,
                           const CostTable& costs, const Topology& topology, const std::string& path,
                           const std::vector<int>& rank_devices = {});

}  // namespace stagecraft::sim
