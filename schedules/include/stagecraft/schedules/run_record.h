// One record of a run (DESIGN.md §4-§6), predicted or measured: per-op timings, memory over
// time and per-rank results, plus what only the executor measures. The simulator fills it,
// the executor's ranks each fill their part, and metrics, traces, `compare` and the viewer all
// read it; nothing copies it into look-alike structs. Both fill the op timings and memory;
// FinishRunRecord derives the rest, once, for either.
#pragma once

#include <cstdint>
#include <vector>

#include "stagecraft/schedules/ir.h"

namespace stagecraft::schedules {

// Times in ns since the run's start (the simulator's time 0; the executor's common barrier).
struct OpTiming {
  // compute: run; SEND: transfer start; RECV: post (measured, both: when the device had run the
  // work queued before the post, exec::OpClock::Mark)
  int64_t start_ns = -1;
  // compute: end; SEND/RECV: arrival (measured: the transport's completion on the device where it
  // times it there, else the completion the rank saw)
  int64_t end_ns = -1;
  friend bool operator==(const OpTiming&, const OpTiming&) = default;
};

struct MemorySample {
  int64_t time_ns = 0;
  int64_t bytes = 0;
  friend bool operator==(const MemorySample&, const MemorySample&) = default;
};

// What one rank did.
struct RankRecord {
  std::vector<OpTiming> ops;          // by op index in the rank's IR list
  std::vector<MemorySample> memory;   // one sample per change
  int64_t peak_memory_bytes = 0;
  // With ranks sharing its device (pipeline.ranks_per_device > 1): the peak of their sum, which
  // the device must hold; -1 when the rank has its device to itself.
  int64_t device_peak_memory_bytes = -1;
  // With ranks sharing its device: that device (sim::PipelineSpec::RankDevices's index); -1
  // when the rank has its device to itself.
  int device = -1;
  int peak_weight_versions = 0;       // max over local stages
  // With copies in its list (OFFLOAD / RELOAD): the peak of what it holds in host memory, from
  // an OFFLOAD's start to its RELOAD's end; -1 for a rank that copies nothing.
  int64_t peak_host_memory_bytes = -1;
  // Derived from the timings by FinishRunRecord.
  int64_t busy_ns = 0;                // compute ops (F, B, I, W, STEP; not REDUCE_GRAD)
  int64_t first_f_start_ns = -1;
  int64_t last_compute_end_ns = 0;
  int peak_inflight = 0;              // stage-microbatches between their F and their B or I
  bool oom = false;                   // peak (or its device's, when shared) over the device's memory
  // Measured only.
  std::vector<double> losses;         // mean per step; on the rank of the last stage
};

struct RunRecord {
  int64_t start_ns = 0;  // first op start over all ranks
  int64_t end_ns = 0;    // last compute or STEP end over all ranks
  std::vector<RankRecord> ranks;
  uint64_t events = 0;   // simulator events processed (0 when measured)
  // With copies to host memory: per node of the machine (sim::Topology::NodeOf), the peak of
  // what its ranks hold in its host memory together; empty without copies.
  std::vector<int64_t> node_peak_host_memory_bytes;

  int64_t makespan_ns() const { return end_ns - start_ns; }
};

// Derives what the timings of `schedule`'s ops in `record` imply (an op that did not run has
// start_ns < 0; a rank runs its compute ops in list order, so those that ran are a prefix):
// each rank's busy time, first F start, last compute end, in-flight peak (PeakInflight over
// what ran) and OOM against rank r's device memory `rank_memory_bytes[r]` (none when the list is
// empty or the entry 0); the run's start (its first op, a receive may be posted before any
// compute starts) and end (its last compute or STEP end). The simulator and the executor (its
// ranks' records joined) both call it.
void FinishRunRecord(const Schedule& schedule, const std::vector<int64_t>& rank_memory_bytes, RunRecord* record);
// Every rank against one device memory (0: none).
inline void FinishRunRecord(const Schedule& schedule, int64_t device_memory_bytes, RunRecord* record) {
  FinishRunRecord(schedule, std::vector<int64_t>(schedule.ops.size(), device_memory_bytes), record);
}

// A measured run's ranks that shared a device (`rank_devices[r]` is rank r's device; empty, or
// no device named twice: nothing to do): each gets `device`, and `device_peak_memory_bytes`, the
// peak over time of its device's ranks' memory together, each rank's bytes those of its last
// sample (0 before its first). The simulator's memory model keeps the same sum as it runs
// (sim/memory_model.h); call this before FinishRunRecord, which judges OOM on it.
void SumSharedDeviceMemory(const std::vector<int>& rank_devices, RunRecord* record);

}  // namespace stagecraft::schedules
