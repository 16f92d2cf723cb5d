// Copy streams (DESIGN.md §10): each rank has two, one to host memory and one back, each running
// its OFFLOADs or RELOADs one at a time in list order (a CUDA stream per direction). A copy
// starts once it is posted (the compute stream reaches it in the list, after the op before it
// ended) and first on its stream; a RELOAD also waits for the OFFLOAD that sent its tensor away
// to end. It pays the host link's latency, then moves its bytes over its node's host link
// (Topology::HostLinks), shared with the node's other copies that way (Transfers::StartLinkFlow).
// A compute op or STEP waits for the RELOADs that bring back what it reads (schedules::CopyWaits).
// Host memory is the copies': a tensor holds it from its OFFLOAD's start to its RELOAD's end, and
// its peaks per rank and per node go into the run record.
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <vector>

#include "stagecraft/schedules/ir.h"
#include "stagecraft/schedules/run_record.h"
#include "stagecraft/sim/cost_table.h"
#include "stagecraft/sim/event_loop.h"
#include "stagecraft/sim/topology.h"
#include "stagecraft/sim/transfers.h"

namespace stagecraft::sim {

// What a copy of `tensor` of a stage moves: one stage-microbatch's stashed activations, one
// weight version with the stage's gradients (they travel together, as a module's do), or the
// stage's optimizer state.
int64_t CopyBytes(const StageCost& cost, schedules::Tensor tensor);

// One copy alone on device `device`'s host link: its latency + bytes / its bandwidth. Throws
// InputError when the device's node has no host (topology.host).
double CopyAloneNs(const Topology& topology, int device, int64_t bytes);

class CopyStreams final : public EventHandler {
 public:
  // Told when a copy starts (after its wait, before its latency) and when its last byte lands.
  class Listener {
   public:
    virtual void CopyStarted(int rank, int index, const schedules::Op& op) = 0;
    virtual void CopyDone(int rank, int index, const schedules::Op& op) = 0;

   protected:
    ~Listener() = default;
  };

  // The Transfers slots it needs from `first_slot` on: two per rank when the schedule has copies.
  static size_t SlotsNeeded(const schedules::Schedule& schedule);

  // Keeps references to its arguments, which must outlive it. Rank r runs on device
  // rank_devices[r] (empty: device r). Throws InputError when a rank that copies has no host.
  // `hold_compute`: SimConfig::copies_hold_compute.
  CopyStreams(const schedules::Schedule& schedule, const CostTable& costs, const Topology& topology,
              Transfers* transfers, size_t first_slot, EventLoop* loop, Listener* listener,
              schedules::RunRecord* record, const std::vector<int>& rank_devices, bool hold_compute = false);

  bool any() const { return any_; }
  // The compute op or STEP at `index` of `rank` may start: its RELOADs have ended (holding
  // compute: every copy posted before it has).
  bool Ready(int rank, int index) const;
  void Post(int rank, int index, const schedules::Op& op);
  // A flow of Transfers ended: true when it was a copy's (and the copy is done).
  bool FlowArrived(size_t slot);

  void OnEvent(const Event& event) override;  // a copy's latency is paid: its bytes start

 private:
  enum Direction : int { kToHost = 0, kToDevice = 1 };
  struct Stream {
    std::deque<int> queue;  // posted, in list order; the front runs when `running`
    bool running = false;
  };
  struct Rank {
    std::vector<std::vector<int32_t>> waits;  // schedules::CopyWaits of its list
    std::vector<bool> done;                   // per op: a copy that has ended
    Stream streams[2];
    std::vector<int> links[2];                // its node's host link, each way
    int64_t latency_ns = 0;
    int node = 0;
    __int128 host_bytes = 0;                  // held in host memory now (wide: see MemoryModel)
    int unfinished = 0;                       // posted and not ended
  };

  void TryStart(int rank, Direction d);
  bool WaitsMet(int rank, int index) const;  // the copies op `index` waits for have ended
  void HostAdd(int rank, int64_t delta);
  size_t Slot(int rank, Direction d) const { return first_slot_ + static_cast<size_t>(rank) * 2 + d; }

  const schedules::Schedule& schedule_;
  const CostTable& costs_;
  Transfers* transfers_;
  size_t first_slot_;
  EventLoop* loop_;
  Listener* listener_;
  schedules::RunRecord* record_;
  std::vector<Rank> ranks_;
  std::vector<__int128> node_host_bytes_;  // per node, now
  bool any_ = false;
  bool hold_compute_ = false;
};

}  // namespace stagecraft::sim
