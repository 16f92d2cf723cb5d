// Memory per rank over time (DESIGN.md §4): weights x live versions + gradients + optimizer state
// of each local stage, activations from F's start to B/I's end (after I only the W stash, until
// W), and transfer buffers; the peak and the samples go into the run record (OOM against them:
// schedules::FinishRunRecord).
#pragma once

#include <atomic>
#include <cstdint>
#include <vector>

#include "stagecraft/schedules/ir.h"
#include "stagecraft/schedules/run_record.h"
#include "stagecraft/sim/cost_table.h"

namespace stagecraft::sim {

// Whether each stage of `schedule` keeps PipeMare's weight velocity, one more weight-sized buffer
// from the start (its policy is correctable and training.pipemare.correction is on).
bool KeepsWeightVelocity(const schedules::Schedule& schedule, const CostTable& costs);

// Weight versions (weights.h assigns them): version 0 of every stage exists from the start; a
// STEP adds the version it produces, and a version is freed after its last reader once it is no
// longer the newest. When nobody reads the old newest any more at a STEP, the STEP is one net
// change (an in-place update never shows two copies in the peak).
//
// Every change takes the time it happens at; the caller gives changes in time order. Samples
// at one time collapse into one (the last), while the peak sees every intermediate total.
class MemoryModel {
 public:
  // Counts the readers of each (stage, version) in `schedule` and charges weights, gradients and
  // optimizer state at time 0, but for those a stage keeps on the host from the start (spilled:
  // schedules::StartOnHost). `record` has one RankRecord per rank. Keeps references to
  // `costs` and `record`, which must outlive it. `stop` as SimConfig's: the count of a
  // schedule's readers throws StopRequested when it is set (base/stop.h).
  // `rank_devices` as SimConfig's: ranks that name one device have their sum followed too
  // (RankRecord::device_peak_memory_bytes).
  MemoryModel(const schedules::Schedule& schedule, const CostTable& costs, bool record_samples,
              schedules::RunRecord* record, const std::atomic<bool>* stop = nullptr,
              const std::vector<int>& rank_devices = {});

  // A compute op or STEP of `rank` starts / finishes: F holds its activations; B frees them, I
  // keeps only the W stash, W frees that; then the op's read of its weight version is done. A
  // finished STEP adds its new version.
  void ComputeStarted(int64_t now_ns, int rank, const schedules::Op& op);
  void ComputeFinished(int64_t now_ns, int rank, const schedules::Op& op);

  // Transfer buffers (or anything else held for a while).
  void Allocate(int64_t now_ns, int rank, int64_t bytes) { Add(now_ns, rank, bytes); }
  void Free(int64_t now_ns, int rank, int64_t bytes) { Add(now_ns, rank, -bytes); }

  int64_t bytes(int rank) const { return Saturated(bytes_[rank]); }

 private:
  // Totals in 128 bits: each size is at most 1 PiB (limits.h), but a rank may hold millions of
  // them at once. What the record sees saturates at int64's end (more than 8 EiB: OOM anyway).
  using Wide = __int128;
  static int64_t Saturated(Wide bytes);

  void Add(int64_t now_ns, int rank, int64_t delta);
  void ReadDone(int64_t now_ns, const schedules::Op& op);
  void StepDone(int64_t now_ns, const schedules::Op& step);

  const schedules::Shape shape_;
  const CostTable& costs_;
  bool record_samples_;
  schedules::RunRecord* record_;
  std::vector<Wide> bytes_;                       // per rank, now
  std::vector<int> shared_of_;                    // per rank: index in shared_bytes_, -1 alone on its device
  std::vector<Wide> shared_bytes_;                // per shared device, now
  std::vector<std::vector<int>> shared_ranks_;    // per shared device, its ranks
  std::vector<std::vector<int>> readers_left_;    // per stage, per version
  std::vector<int> live_versions_, newest_;       // per stage
};

}  // namespace stagecraft::sim
