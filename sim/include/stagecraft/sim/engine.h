// The discrete-event engine (DESIGN.md §4): times every op of a lowered schedule on a
// topology. Time is int64 nanoseconds; events are ordered by (time, sequence number), so the
// same input always gives the same output.
//
// Model. Each rank has one compute stream that runs its compute ops strictly in IR order; an op
// starts when the stream is free and its input has arrived. SEND/RECV only post a transfer and
// take no stream time. A transfer starts once both ends are posted, waits the route's latency
// (+ the cost table's p2p latency), then moves its bytes over every link of its route; a link's
// bandwidth is split equally among the transfers crossing it at that moment, and a transfer
// moves at the rate of its most loaded link (rates are recomputed whenever a transfer starts or
// ends its data phase). A STEP takes the stage's step_ns on the compute stream (0: instant). Memory per rank is tracked over time: weights x
// live versions + gradients + optimizer state for each local stage, activations from F's start
// to B/I's end (after I only the W stash is kept until W), and transfer buffers (send side from
// post to arrival, receive side from post to its consumer's start).
#pragma once

#include <cstdint>
#include <vector>

#include "stagecraft/schedules/ir.h"
#include "stagecraft/sim/costs.h"
#include "stagecraft/sim/topology.h"

namespace stagecraft::sim {

struct OpTiming {
  int64_t start_ns = -1;  // compute: run; SEND: transfer start; RECV: post
  int64_t end_ns = -1;    // compute: end; SEND/RECV: arrival
};

struct MemorySample {
  int64_t time_ns = 0;
  int64_t bytes = 0;
};

struct RankResult {
  int64_t busy_ns = 0;          // compute time
  int64_t first_f_start_ns = -1;
  int64_t last_compute_end_ns = 0;
  int64_t peak_memory_bytes = 0;
  int peak_inflight = 0;        // stage-microbatch activations stashed at once
  int peak_weight_versions = 0; // max over local stages
  bool oom = false;
};

struct SimResult {
  int64_t start_ns = 0;  // first op start
  int64_t end_ns = 0;    // last op end
  std::vector<RankResult> ranks;
  std::vector<std::vector<OpTiming>> timing;          // [rank][op_index]
  std::vector<std::vector<MemorySample>> memory;      // [rank], one sample per change
  uint64_t events = 0;

  int64_t makespan_ns() const { return end_ns - start_ns; }
};

struct SimConfig {
  int64_t device_memory_bytes = 0;  // 0: no OOM check
  bool record_memory = true;        // keep the memory-over-time samples
};

// `schedule` must be lowered and valid (Validate empty); `costs.stages` has one entry per stage.
SimResult Simulate(const schedules::Schedule& schedule, const CostTable& costs, const Topology& topology,
                   const SimConfig& config);

}  // namespace stagecraft::sim
