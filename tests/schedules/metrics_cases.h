// Test helpers for the metrics, codec and trace tests: one two-rank schedule's metrics and a
// measured run's executor numbers, already rounded as the metrics file writes them (6 decimals
// for times, 9 for the bubble, 9 significant digits for losses), so they read back exactly.
#pragma once

#include "stagecraft/schedules/metrics.h"

namespace stagecraft::schedules::test_cases {

inline ScheduleMetrics TwoRankMetrics() {
  ScheduleMetrics m;
  m.schedule = "1f1b";
  m.ranks = 2;
  m.microbatches = 8;
  m.microbatch_size = 4;
  m.steps = 2;
  m.makespan_ns = 66'000'000;
  m.makespan_ms = 66;
  m.step_time_ms = 33;
  m.throughput_samples_per_s = 969.69697;
  m.bubble_fraction = 0.272727273;
  // rank, busy, span, peak memory, in flight, versions, oom, then compute, wait, transfer,
  // overhead, idle (the five sum to the makespan)
  m.ranks_detail = {{0, 48, 60.5, 1LL << 30, 4, 1, false, 48, 2.5, 1.5, 0.25, 13.75},
                    {1, 48.000001, 61, 2048, 1, 1, true, 48.000001, 12, 0.5, 0.000001, 5.499998}};
  return m;
}

inline ExecutorMetrics MeasuredOnly() {
  ExecutorMetrics e;
  e.losses = {0.587640123, 2};
  e.step_ms = {41.5, 40.25};
  e.overhead_ns_per_op = 6543.2;
  return e;
}

}  // namespace stagecraft::schedules::test_cases
