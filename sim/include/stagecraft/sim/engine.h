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
// ends its data phase). A STEP takes the stage's step_ns on the compute stream (0: instant).
// Memory per rank is tracked over time: weights x live versions + gradients + optimizer state
// for each local stage, activations from F's start to B/I's end (after I only the W stash is
// kept until W), and transfer buffers (send side from post to arrival, receive side from post
// to its consumer's start). Which producer an op waits on, and which transfer carries it, is
// the one data-edge rule of schedules/edges.h. With replicas, a REDUCE_GRAD only posts, like a
// SEND: it runs on the rank's collective stream (collective_streams.h), and its STEP waits for
// it.
//
// Units: event_loop.h (the core: event order, cancel), compute_streams.h, transfers.h (links),
// memory_model.h (memory and weight versions), collective_streams.h; engine.cpp joins them.
#pragma once

#include <atomic>
#include <cstdint>
#include <vector>

#include "stagecraft/schedules/ir.h"
#include "stagecraft/schedules/run_record.h"
#include "stagecraft/sim/cost_table.h"
#include "stagecraft/sim/topology.h"

namespace stagecraft::sim {

using schedules::MemorySample;
using schedules::OpTiming;
using schedules::RankRecord;
using schedules::RunRecord;

struct SimConfig {
  // Each pipeline rank's device memory, rank 0 first (sim::RankDeviceMemories); empty or 0: no
  // OOM check.
  std::vector<int64_t> rank_memory_bytes;
  bool record_memory = true;  // keep the memory-over-time samples
  // The topology device of each pipeline rank (PipelineSpec::DeviceOf of replica 0, tensor rank
  // 0); empty: rank r on device r.
  std::vector<int> rank_devices;
  // How a device that several ranks share splits itself (DeviceSpec::time_slice_ns): 0,
  // processor sharing; else round-robin turns of this length.
  int64_t time_slice_ns = 0;
  // Copies between device and host memory hold their rank's compute (DeviceSpec::copy_engine
  // false: a CPU core's memcpy): a compute op waits for every copy posted before it, and a rank's
  // copies run one at a time, either way. Else they run on copy streams beside the compute.
  bool copies_hold_compute = false;
  // With data-parallel replicas (Schedule::data_parallel > 1): for each pipeline rank, the
  // devices of its replicas in ring order (PipelineSpec::ReplicaDevices), which its REDUCE_GRADs
  // run over (collective_streams.h). Empty with replicas and rank_devices empty: replica i of
  // rank r on device i x ranks + r (replica 0 on devices 0 .. ranks - 1).
  std::vector<std::vector<int>> replica_devices;
  // With expert parallelism (ALL_TO_ALLs in the schedule): for each pipeline rank, the devices of
  // its expert group (PipelineSpec::ExpertDevices), which its ALL_TO_ALLs run over; empty: none.
  std::vector<std::vector<int>> expert_devices;
  // Set by another thread, ends the run early: Simulate throws StopRequested (base/stop.h)
  // within a few thousand events. Null: the run goes to its end.
  const std::atomic<bool>* stop = nullptr;
};

// `schedule` must be lowered and valid (Validate empty); `costs.stages` has one entry per stage.
// Throws InputError (run_bound.h) when the run could last over kMaxRunNs of simulated time or a
// transfer alone over kMaxOpNs, before any event runs.
RunRecord Simulate(const schedules::Schedule& schedule, const CostTable& costs, const Topology& topology,
                   const SimConfig& config);

class CollectivePlans;  // collective_streams.h
// The same with the REDUCE_GRADs' plans built by the caller over config.replica_devices (who
// then reads them too: harness::Predict), which must outlive the call.
RunRecord Simulate(const schedules::Schedule& schedule, const CostTable& costs, const Topology& topology,
                   const SimConfig& config, const CollectivePlans& plans);

}  // namespace stagecraft::sim
