// Transfers over the topology's links (DESIGN.md §4). A transfer is a rendezvous: it starts once
// both ends are posted, waits its route's latency (+ the cost table's p2p latency), then moves its
// bytes over every link of the route, at the rate of its most loaded link. With a measured
// point-to-point fit (a calibrated profile) every transfer instead takes the fit's latency plus
// bytes / bandwidth, measured between the ranks as placed, with no link sharing modelled.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <vector>

#include "stagecraft/sim/cost_table.h"
#include "stagecraft/sim/event_loop.h"
#include "stagecraft/sim/topology.h"

namespace stagecraft::sim {

// Link sharing: a link's bandwidth is split equally among the transfers in their data phase
// on it at that moment (not max-min fair: a share one transfer cannot use is not handed to the
// others), and a transfer moves at the smallest share along its route. Rates are recomputed,
// and the finish re-timed, for every transfer on a link where one starts or ends its data phase.
class Transfers final : public EventHandler {
 public:
  enum class End : uint8_t { kSend, kRecv };

  // Told when a transfer starts (both ends posted) and when its last byte arrives.
  class Listener {
   public:
    virtual void TransferStarted(size_t slot) = 0;
    virtual void TransferArrived(size_t slot) = 0;

   protected:
    ~Listener() = default;
  };

  struct Transfer {
    int src_rank = 0, dst_rank = 0;  // pipeline ranks (their devices: the constructor's map)
    int64_t bytes = 0;
    bool send_posted = false, recv_posted = false;
    bool in_data_phase = false;
    int32_t post_order = -1;       // n: the n-th transfer to get a first end posted
    const std::vector<int>* route = nullptr;  // the topology's, kept (set at the first post)
    double remaining_bytes = 0;    // as of last_update_ns
    double bytes_per_ns = 0;
    int64_t last_update_ns = 0;
    EventId arrival;               // pending arrival, cancelled when the rate changes
    int64_t measured_ns = -1;      // a replayed run's: from both ends posted to arrival; -1: modelled
  };

  // `slots` transfers at most, each named by its slot (the engine uses schedules::EdgeKey).
  // Pipeline rank r runs on topology device rank_devices[r] (empty: device r). Keeps references
  // to its arguments, which must outlive it.
  Transfers(const Topology& topology, int64_t p2p_latency_ns, size_t slots, EventLoop* loop, Listener* listener,
            std::optional<P2pFit> measured = std::nullopt, std::vector<int> rank_devices = {});

  // Posts one end of the transfer in `slot` at the loop's current time; both ends name the same
  // ranks and bytes. The second end starts the transfer.
  void Post(size_t slot, End end, int src_rank, int dst_rank, int64_t bytes);
  // The transfer in `slot` takes `ns` from its start (both ends posted) to its arrival, as a
  // replayed run measured it, sharing no link (CostTable::transfer_ns). Before its first post.
  void SetMeasuredNs(size_t slot, int64_t ns);

  // Starts one flow of a collective (collective_streams.h) in `slot` at the loop's time: no
  // rendezvous and no latency (its phase pays the steps' latency), its bytes over the route
  // between two devices, sharing links as a transfer does (with a measured fit: bytes over its
  // bandwidth, alone). A slot may carry one flow after another; src_rank and dst_rank are -1.
  void StartFlow(size_t slot, int src_device, int dst_device, int64_t bytes);
  // Starts a flow over the directed links `links` (a node's host link, Topology::HostLinks: the
  // copies of offload), which must outlive it, sharing them as any transfer does; no latency (the
  // caller pays the links'), and never timed by a measured fit (that fit is device to device).
  void StartLinkFlow(size_t slot, const std::vector<int>& links, int64_t bytes);

  const Transfer& operator[](size_t slot) const { return transfers_[slot]; }

  void OnEvent(const Event& event) override;

 private:
  enum EventKind : int32_t { kDataStart, kArrival };

  void StartFlowOn(size_t slot, const std::vector<int>& route, int64_t bytes, bool measured);
  void Enlist(size_t slot);                        // its post order, at its first post
  int64_t MeasuredDataNs(int64_t bytes) const;     // bytes over the measured fit's bandwidth
  void Start(size_t slot);
  void DataStart(size_t slot);
  void Arrive(size_t slot);
  void UpdateRates(const std::vector<int>& links);
  double RateOf(const Transfer& t) const;  // bytes per ns: the smallest share along the route

  int DeviceOf(int rank) const { return rank_devices_.empty() ? rank : rank_devices_[rank]; }

  const Topology& topology_;
  std::vector<int> rank_devices_;
  int64_t p2p_latency_ns_;
  std::optional<P2pFit> measured_;
  EventLoop* loop_;
  Listener* listener_;
  std::vector<Transfer> transfers_;                // by slot
  std::vector<int32_t> slot_by_post_order_;
  std::vector<std::vector<int32_t>> link_active_;  // per link: post orders of the transfers on it
  std::vector<int32_t> affected_;                  // scratch for UpdateRates
};

}  // namespace stagecraft::sim
