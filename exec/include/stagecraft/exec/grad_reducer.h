// The data-parallel all-reduces of one rank's runtime (DESIGN.md §9): a REDUCE_GRAD op posts the
// sum of its stage's gradients for one update over the replicas (replica_group.h) and returns at
// once, so the collective overlaps the backwards still to run; that stage's STEP for the update
// waits for it first. A REDUCE_GRAD's time on the run's clock starts when the device has run the
// backwards queued before its post (OpClock::Mark) and ends when the sum completed: on the device
// where the group times it there (ReplicaGroup::CompletedNs), else when a poll after an op or the
// STEP's wait saw it.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <utility>
#include <vector>

#include "stagecraft/exec/op_clock.h"
#include "stagecraft/exec/replica_group.h"
#include "stagecraft/schedules/ir.h"
#include "stagecraft/schedules/run_record.h"

namespace stagecraft::exec {

// The floats of each sum the REDUCE_GRAD ops of `ops` post, each once, smallest first
// (`floats_of_stage` gives a stage's gradient floats): what a replica group prepares before the
// run (ReplicaGroup::Prepare). Every replica of a pipeline rank computes the same list.
std::vector<int64_t> SumSizes(const std::vector<schedules::Op>& ops,
                              const std::function<int64_t(int stage)>& floats_of_stage);

class GradReducer {
 public:
  // For `schedule` (data_parallel replicas, which `group` must hold; null when there is one).
  // REDUCE_GRAD times go to `times` (one entry per op of the rank). Keeps references to all.
  GradReducer(const schedules::Schedule& schedule, ReplicaGroup* group, OpClock& clock,
              std::vector<schedules::OpTiming>* times);

  // REDUCE_GRAD `op`, op `op_index` of the rank: posts the sum of `floats` gradients at `grads`.
  void Post(int op_index, const schedules::Op& op, float* grads, int64_t floats);
  // Notes the all-reduces that completed (their end time).
  void Poll();
  // Before STEP `step`: waits for its update's all-reduce unless a poll saw it complete (nothing
  // to wait for with one replica). Throws TimeoutError naming the REDUCE_GRAD op on a wait past
  // the group's deadline.
  void Finish(const schedules::Op& step);

  bool empty() const { return pending_.empty(); }

 private:
  struct Pending {
    ReplicaGroup::Request request = 0;
    int op = 0;         // the REDUCE_GRAD's index in the rank's op list
    bool done = false;  // a poll saw it complete (its handle is released)
  };
  using Key = std::pair<int32_t, int64_t>;  // (stage, update index)
  Key KeyOf(const schedules::Op& op) const;

  const schedules::Schedule& schedule_;
  ReplicaGroup* group_;
  OpClock& clock_;
  std::vector<schedules::OpTiming>* times_;
  std::map<Key, Pending> pending_;
};

}  // namespace stagecraft::exec
