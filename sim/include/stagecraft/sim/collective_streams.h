// Collective streams (DESIGN.md §4, §9, §10): with data-parallel replicas each rank has one stream
// for its REDUCE_GRADs, beside its compute stream, and with expert parallelism one for its
// ALL_TO_ALLs (each its stage's all-to-all plan for its pass, PlanAllToAll over the rank's expert
// group; the rank's list waits for it, all_to_all.h), as NCCL runs a communicator's collectives in
// order on their own CUDA stream. A REDUCE_GRAD posted by the compute stream starts when the
// collective stream is free; it runs its stage's CollectivePlan (collectives.h) phase by phase:
// the phase's steps' latency, then its flows over the topology's links through Transfers, where
// they share links with the pipeline's transfers and with other ranks' collectives; the last
// flow's arrival ends the phase. The STEP that reads the REDUCE_GRAD waits for its end. With a
// measured all-reduce fit (CostTable::allreduce) the plan is one measured phase: the fit's time
// for the D replicas, with no flows, so it shares no link (as a measured p2p transfer).
//
// Symmetric replicas are simulated once: the engine runs replica 0's pipeline, and each of its
// collectives moves the flows of the whole replica group (every replica's share of the ring).
// The other replicas' pipeline transfers are not simulated; on the per-dimension topology they
// cross links of their own devices, never replica 0's.
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <unordered_set>
#include <vector>

#include "stagecraft/schedules/ir.h"
#include "stagecraft/schedules/run_record.h"
#include "stagecraft/sim/collectives.h"
#include "stagecraft/sim/cost_table.h"
#include "stagecraft/sim/event_loop.h"
#include "stagecraft/sim/topology.h"
#include "stagecraft/sim/transfers.h"

namespace stagecraft::sim {

// Each stage's plan: the all-reduce of its gradients (StageCost::grad_bytes) over the devices of
// its rank's replicas (`replica_devices[rank]`, ring order), or as the cost table's measured fit
// says. Empty when there is one replica. With `expert_devices` (each rank's expert group; empty:
// none) and a stage whose cost has all-to-alls, the plans of its F's and its backward's
// ALL_TO_ALLs too.
class CollectivePlans {
 public:
  CollectivePlans(const schedules::Schedule& schedule, const CostTable& costs, const Topology& topology,
                  const std::vector<std::vector<int>>& replica_devices,
                  const std::vector<std::vector<int>>& expert_devices = {});
  bool empty() const { return plans_.empty(); }
  const CollectivePlan& of(int stage) const { return plans_[stage]; }
  // The plan of an ALL_TO_ALL (its stage and pass, Op::tensor); an empty plan when none.
  const CollectivePlan& AllToAllOf(const schedules::Op& op) const;
  // The most flows one phase of any plan starts (the slots a rank's stream needs).
  size_t max_flows() const { return max_flows_; }
  // Stage `stage`'s all-reduce alone (PlanAloneNs: the least its REDUCE_GRAD takes).
  double AloneNsOf(int stage) const { return stage_alone_ns_[stage]; }
  // Every REDUCE_GRAD of the schedule, each alone (run_bound.h adds it to the bound).
  double AloneNs() const { return alone_ns_; }

 private:
  std::vector<CollectivePlan> plans_;    // by stage
  // An ALL_TO_ALL's plan by its stage and pass (tensor activations: the F's; gradients: the backward's).
  static size_t A2aIndex(int stage, schedules::Tensor tensor) {
    return static_cast<size_t>(stage) * 2 + (tensor == schedules::Tensor::kActivations ? 0 : 1);
  }
  std::vector<CollectivePlan> a2a_plans_;  // by A2aIndex
  CollectivePlan none_;
  std::vector<double> stage_alone_ns_;   // by stage
  size_t max_flows_ = 0;
  double alone_ns_ = 0;
};

class CollectiveStreams final : public EventHandler {
 public:
  class Listener {
   public:
    virtual void CollectiveDone(int rank, int index) = 0;  // the REDUCE_GRAD at `index` of `rank`

   protected:
    ~Listener() = default;
  };

  // Flows use Transfers slots [first_slot, first_slot + ranks x plans.max_flows()). Keeps
  // references to every argument, which must outlive it.
  CollectiveStreams(const schedules::Schedule& schedule, const CollectivePlans& plans, const CostTable& costs,
                    Transfers* transfers, size_t first_slot, EventLoop* loop, Listener* listener,
                    schedules::RunRecord* record);

  // Two streams per rank (the REDUCE_GRADs', the ALL_TO_ALLs'), each with its slots.
  static size_t SlotsNeeded(const schedules::Schedule& schedule, const CollectivePlans& plans) {
    return static_cast<size_t>(schedule.ranks()) * kLanes * plans.max_flows();
  }

  void Post(int rank, int index, const schedules::Op& op);  // a REDUCE_GRAD or an ALL_TO_ALL
  // A flow of `slot` arrived; false when the slot is not a collective's.
  bool FlowArrived(size_t slot);
  // Whether the REDUCE_GRAD of `stage` that the STEP producing `version` reads has finished.
  bool Done(int rank, int stage, int version) const;
  // Whether the ALL_TO_ALL at `index` of `rank` has finished.
  bool AllToAllDone(int rank, int index) const { return streams_[Lane(rank, true)].done.contains(index); }

  void OnEvent(const Event& event) override;  // a phase's latency has passed

 private:
  static constexpr int kLanes = 2;
  struct Stream {
    // Each op posted: its index, and the share of its plan still to run (1, or less for a
    // REDUCE_GRAD whose last backward covered part of it: grad_reduce_overlap). The first runs.
    struct Posted {
      int index;
      double left;
    };
    std::deque<Posted> queue;
    int phase = -1;         // of the running one; -1: none running
    size_t flows_left = 0;
    // The finished ones: REDUCE_GRADs by stage x version, ALL_TO_ALLs by op index.
    std::unordered_set<int64_t> done;
  };
  static size_t Lane(int rank, bool a2a) { return static_cast<size_t>(rank) * kLanes + (a2a ? 1 : 0); }
  static int RankOfLane(size_t lane) { return static_cast<int>(lane / kLanes); }
  static bool IsA2aLane(size_t lane) { return lane % kLanes == 1; }

  void StartNext(size_t lane);
  void StartPhase(size_t lane);
  double ShareLeft(int rank, int index, const schedules::Op& op) const;
  void EndPhase(size_t lane);
  int64_t StepLatencyNs(const CollectivePhase& phase) const;
  const schedules::Op& Running(size_t lane) const {
    return schedule_.ops[RankOfLane(lane)][streams_[lane].queue.front().index];
  }
  const CollectivePlan& PlanOf(size_t lane) const;
  static int64_t Key(int stage, int version) { return int64_t{stage} << 32 | static_cast<uint32_t>(version); }

  const schedules::Schedule& schedule_;
  const CollectivePlans& plans_;
  const CostTable& costs_;
  Transfers* transfers_;
  size_t first_slot_;
  EventLoop* loop_;
  Listener* listener_;
  schedules::RunRecord* record_;
  std::vector<Stream> streams_;  // per rank and lane (Lane)
};

}  // namespace stagecraft::sim
