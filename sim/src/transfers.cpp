// Transfers with latency and shared links (see transfers.h).
#include "stagecraft/sim/transfers.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <utility>
#include <vector>

#include "stagecraft/base/check.h"

namespace stagecraft::sim {
namespace {

// Far beyond any run's bound (kMaxRunNs, 1 year), and far from int64's end when added to a time.
constexpr int64_t kFarNs = int64_t{1} << 60;

}  // namespace

Transfers::Transfers(const Topology& topology, int64_t p2p_latency_ns, size_t slots, EventLoop* loop,
                     Listener* listener, std::optional<P2pFit> measured, std::vector<int> rank_devices)
    : topology_(topology),
      rank_devices_(std::move(rank_devices)),
      p2p_latency_ns_(p2p_latency_ns),
      measured_(measured),
      loop_(loop),
      listener_(listener),
      transfers_(slots),
      link_active_(topology.links().size()) {
  SC_CHECK(slots <= static_cast<size_t>(std::numeric_limits<int32_t>::max()), "a slot fits an event argument");
}

void Transfers::Post(size_t slot, End end, int src_rank, int dst_rank, int64_t bytes) {
  SC_CHECK(slot < transfers_.size(), "transfer slot out of range");
  Transfer& t = transfers_[slot];
  if (t.post_order < 0) {
    t.src_rank = src_rank;
    t.dst_rank = dst_rank;
    t.bytes = bytes;
    t.route = &topology_.Route(DeviceOf(src_rank), DeviceOf(dst_rank));
    Enlist(slot);
  }
  SC_CHECK(t.src_rank == src_rank && t.dst_rank == dst_rank && t.bytes == bytes,
           "both ends of a transfer name the same ranks and bytes");
  bool& posted = end == End::kSend ? t.send_posted : t.recv_posted;
  SC_CHECK(!posted, "each end of a transfer is posted once");
  posted = true;
  if (t.send_posted && t.recv_posted) Start(slot);
}

void Transfers::SetMeasuredNs(size_t slot, int64_t ns) {
  SC_CHECK(slot < transfers_.size() && ns >= 0, "a measured transfer time for a slot");
  transfers_[slot].measured_ns = ns;
}

void Transfers::StartFlow(size_t slot, int src_device, int dst_device, int64_t bytes) {
  StartFlowOn(slot, topology_.Route(src_device, dst_device), bytes, measured_.has_value());
}

void Transfers::StartLinkFlow(size_t slot, const std::vector<int>& links, int64_t bytes) {
  for (const int link : links) {
    SC_CHECK(link >= 0 && static_cast<size_t>(link) < link_active_.size(), "a flow's link is one of the machine's");
  }
  StartFlowOn(slot, links, bytes, false);
}

void Transfers::StartFlowOn(size_t slot, const std::vector<int>& route, int64_t bytes, bool measured) {
  SC_CHECK(slot < transfers_.size(), "flow slot out of range");
  Transfer& t = transfers_[slot];
  SC_CHECK(!t.in_data_phase && t.arrival.seq == EventId::kNone, "a slot carries one flow at a time");
  t = Transfer{};
  t.src_rank = t.dst_rank = -1;
  t.bytes = bytes;
  t.send_posted = t.recv_posted = true;
  t.route = &route;
  Enlist(slot);
  const auto arg = static_cast<int32_t>(slot);
  if (measured) {
    t.arrival = loop_->ScheduleAt(loop_->now_ns() + MeasuredDataNs(bytes), this, kArrival, arg);
  } else if (bytes <= 0 || t.route->empty()) {
    t.arrival = loop_->ScheduleAt(loop_->now_ns(), this, kArrival, arg);
  } else {
    DataStart(slot);
  }
}

void Transfers::Enlist(size_t slot) {
  transfers_[slot].post_order = static_cast<int32_t>(slot_by_post_order_.size());
  slot_by_post_order_.push_back(static_cast<int32_t>(slot));
}

int64_t Transfers::MeasuredDataNs(int64_t bytes) const {
  const double rate = measured_->DataBytesPerS();
  return rate > 0 ? std::llround(static_cast<double>(bytes) * 1e9 / rate) : 0;
}

void Transfers::OnEvent(const Event& event) {
  const auto slot = static_cast<size_t>(event.b);
  if (event.a == kDataStart) {
    DataStart(slot);
  } else {
    Arrive(slot);
  }
}

void Transfers::Start(size_t slot) {
  Transfer& t = transfers_[slot];
  listener_->TransferStarted(slot);
  if (t.measured_ns >= 0) {  // a replayed run's own time
    t.arrival = loop_->ScheduleAt(loop_->now_ns() + t.measured_ns, this, kArrival, static_cast<int32_t>(slot));
    return;
  }
  if (measured_) {
    t.arrival = loop_->ScheduleAt(loop_->now_ns() + measured_->latency_ns + MeasuredDataNs(t.bytes), this, kArrival,
                                  static_cast<int32_t>(slot));
    return;
  }
  const int64_t at = loop_->now_ns() + topology_.RouteLatencyNs(DeviceOf(t.src_rank), DeviceOf(t.dst_rank)) + p2p_latency_ns_;
  const auto arg = static_cast<int32_t>(slot);
  if (t.bytes <= 0 || t.route->empty()) {  // nothing to move, or ranks sharing a device: no link to cross
    t.arrival = loop_->ScheduleAt(at, this, kArrival, arg);
  } else {
    loop_->ScheduleAt(at, this, kDataStart, arg);
  }
}

void Transfers::DataStart(size_t slot) {
  Transfer& t = transfers_[slot];
  t.in_data_phase = true;
  t.remaining_bytes = static_cast<double>(t.bytes);
  t.last_update_ns = loop_->now_ns();
  for (int link : *t.route) link_active_[link].push_back(t.post_order);
  UpdateRates(*t.route);
}

void Transfers::Arrive(size_t slot) {
  Transfer& t = transfers_[slot];
  t.arrival = EventId{};
  if (t.in_data_phase) {
    t.in_data_phase = false;
    for (int link : *t.route) std::erase(link_active_[link], t.post_order);
    UpdateRates(*t.route);
  }
  listener_->TransferArrived(slot);
}

double Transfers::RateOf(const Transfer& t) const {
  double rate = 0;
  bool first = true;
  for (int link : *t.route) {
    const double share = topology_.links()[link].bandwidth_bytes_per_s * 1e-9 / link_active_[link].size();
    rate = first ? share : std::min(rate, share);
    first = false;
  }
  return rate;
}

// Re-times every transfer crossing one of `links`, in post order: progress so far at the old
// rate, then the new rate and a fresh arrival in place of the old one.
void Transfers::UpdateRates(const std::vector<int>& links) {
  affected_.clear();
  for (int link : links) affected_.insert(affected_.end(), link_active_[link].begin(), link_active_[link].end());
  std::sort(affected_.begin(), affected_.end());
  affected_.erase(std::unique(affected_.begin(), affected_.end()), affected_.end());
  const int64_t now = loop_->now_ns();
  for (int32_t order : affected_) {
    const int32_t slot = slot_by_post_order_[order];
    Transfer& t = transfers_[slot];
    t.remaining_bytes =
        std::max(0.0, t.remaining_bytes - t.bytes_per_ns * static_cast<double>(now - t.last_update_ns));
    t.last_update_ns = now;
    t.bytes_per_ns = RateOf(t);
    // At the current shares the rest could take longer than the whole run is bounded by
    // (run_bound.h): such an arrival is always re-timed before it comes, so it is clamped to
    // kFarNs rather than computed past int64.
    const double left = t.bytes_per_ns > 0 ? t.remaining_bytes / t.bytes_per_ns : 0.0;
    const int64_t left_ns = left < static_cast<double>(kFarNs) ? std::llround(left) : kFarNs;
    loop_->Cancel(t.arrival);
    t.arrival = loop_->ScheduleAt(now + left_ns, this, kArrival, slot);
  }
}

}  // namespace stagecraft::sim
