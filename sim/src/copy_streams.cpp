// Two copy streams per rank (see copy_streams.h).
#include "stagecraft/sim/copy_streams.h"

#include <algorithm>
#include <limits>

#include <fmt/format.h>

#include "stagecraft/base/check.h"
#include "stagecraft/base/error.h"
#include "stagecraft/schedules/tensors.h"

namespace stagecraft::sim {

using schedules::Op;
using schedules::OpKind;
using schedules::Tensor;

int64_t CopyBytes(const StageCost& cost, Tensor tensor) {
  switch (tensor) {
    case Tensor::kActivations: return cost.activation_bytes;
    case Tensor::kWeights: return cost.weight_bytes + cost.grad_bytes;  // a version and its gradients
    case Tensor::kOptimizer: return cost.optimizer_bytes;
    case Tensor::kGradients:  // an ALL_TO_ALL's tokens: never offloaded
    case Tensor::kNone: return 0;
  }
  return 0;
}

namespace {

// The host link of `device`'s node, or an InputError naming the device.
// The directed links a copy of `device` crosses to its host and back (Topology::HostPath).
std::pair<std::vector<int>, std::vector<int>> HostPathOf(const Topology& topology, int device) {
  auto path = topology.HostPath(device);
  if (!path) {
    throw InputError(fmt::format(
        "device {} copies to host memory but its node has no host: state topology.host (memory, bandwidth, latency) "
        "on a topology of nodes and devices",
        device));
  }
  return std::move(*path);
}

}  // namespace

double CopyAloneNs(const Topology& topology, int device, int64_t bytes) {
  const std::vector<int> path = HostPathOf(topology, device).first;
  // The node's link holds the latency; the slowest link on the way, the rate.
  const Topology::Link& node = topology.links()[static_cast<size_t>(path.back())];
  double rate = node.bandwidth_bytes_per_s;
  for (const int link : path) rate = std::min(rate, topology.links()[static_cast<size_t>(link)].bandwidth_bytes_per_s);
  return static_cast<double>(node.latency_ns) + (rate > 0 ? static_cast<double>(bytes) * 1e9 / rate : 0.0);
}

size_t CopyStreams::SlotsNeeded(const schedules::Schedule& schedule) {
  for (const auto& ops : schedule.ops) {
    if (std::any_of(ops.begin(), ops.end(), [](const Op& op) { return schedules::IsCopy(op.kind); })) {
      return static_cast<size_t>(schedule.ranks()) * 2;
    }
  }
  return 0;
}

CopyStreams::CopyStreams(const schedules::Schedule& schedule, const CostTable& costs, const Topology& topology,
                         Transfers* transfers, size_t first_slot, EventLoop* loop, Listener* listener,
                         schedules::RunRecord* record, const std::vector<int>& rank_devices, bool hold_compute)
    : schedule_(schedule),
      costs_(costs),
      transfers_(transfers),
      first_slot_(first_slot),
      loop_(loop),
      listener_(listener),
      record_(record),
      ranks_(static_cast<size_t>(schedule.ranks())),
      hold_compute_(hold_compute) {
  for (int r = 0; r < schedule.ranks(); ++r) {
    Rank& rank = ranks_[r];
    rank.waits = schedules::CopyWaits(schedule.ops[r]);
    // optimizer: host holds host memory on every rank, copies or none.
    if (rank.waits.empty() && !costs.optimizer_on_host) continue;
    any_ = true;
    record->ranks[r].peak_host_memory_bytes = 0;
    rank.done.assign(schedule.ops[r].size(), false);
    const int device = rank_devices.empty() ? r : rank_devices[static_cast<size_t>(r)];
    auto [to_host, to_device] = HostPathOf(topology, device);
    rank.latency_ns = topology.links()[static_cast<size_t>(to_host.back())].latency_ns;  // the node's link's
    rank.links[kToHost] = std::move(to_host);
    rank.links[kToDevice] = std::move(to_device);
    rank.node = std::max(topology.NodeOf(device), 0);
    node_host_bytes_.resize(std::max(node_host_bytes_.size(), static_cast<size_t>(rank.node) + 1), 0);
  }
  if (!any_) return;
  record->node_peak_host_memory_bytes.assign(node_host_bytes_.size(), 0);
  // What starts on the host (a spilled stage's weights and optimizer state) is there from time 0.
  for (int r = 0; r < schedule.ranks(); ++r) {
    if (ranks_[r].waits.empty()) continue;
    for (const schedules::TensorKey& key : schedules::StartOnHost(schedule.ops[r])) {
      if (key.stage >= 0 && key.stage < schedule.stages()) HostAdd(r, CopyBytes(costs.stages[key.stage], key.tensor));
    }
  }
  // optimizer: host: each stage's optimizer state, its weights' master copy and a gradient buffer
  // for the whole run (cost_models.h PlaceOptimizerOnHost).
  if (costs.optimizer_on_host) {
    for (int stage = 0; stage < schedule.stages(); ++stage) {
      const StageCost& c = costs.stages[static_cast<size_t>(stage)];
      HostAdd(schedule.shape.RankOf(stage), c.optimizer_bytes + c.weight_bytes + c.grad_bytes);
    }
  }
}

// Totals in 128 bits, as MemoryModel's; what the record sees saturates at int64's end.
void CopyStreams::HostAdd(int rank, int64_t delta) {
  const auto saturated = [](__int128 bytes) {
    return bytes > std::numeric_limits<int64_t>::max() ? std::numeric_limits<int64_t>::max() : static_cast<int64_t>(bytes);
  };
  Rank& r = ranks_[rank];
  r.host_bytes += delta;
  int64_t& peak = record_->ranks[rank].peak_host_memory_bytes;
  peak = std::max(peak, saturated(r.host_bytes));
  __int128& node = node_host_bytes_[static_cast<size_t>(r.node)];
  node += delta;
  int64_t& node_peak = record_->node_peak_host_memory_bytes[static_cast<size_t>(r.node)];
  node_peak = std::max(node_peak, saturated(node));
}

bool CopyStreams::WaitsMet(int rank, int index) const {
  const Rank& r = ranks_[rank];
  if (r.waits.empty()) return true;
  return std::all_of(r.waits[index].begin(), r.waits[index].end(), [&](int32_t c) { return r.done[c]; });
}

bool CopyStreams::Ready(int rank, int index) const {
  if (hold_compute_ && ranks_[rank].unfinished > 0) return false;
  return WaitsMet(rank, index);
}

void CopyStreams::Post(int rank, int index, const Op& op) {
  SC_CHECK(schedules::IsCopy(op.kind) && !ranks_[rank].waits.empty(), "a copy of a rank with copies");
  const Direction d = op.kind == OpKind::kOffload ? kToHost : kToDevice;
  ranks_[rank].streams[d].queue.push_back(index);
  ++ranks_[rank].unfinished;
  TryStart(rank, d);
}

void CopyStreams::TryStart(int rank, Direction d) {
  Rank& r = ranks_[rank];
  Stream& stream = r.streams[d];
  if (stream.running || stream.queue.empty()) return;
  if (hold_compute_ && r.streams[1 - d].running) return;  // one copy at a time on the compute
  const int index = stream.queue.front();
  if (!WaitsMet(rank, index)) return;  // a RELOAD whose OFFLOAD has not ended: its end tries again
  stream.running = true;
  const Op& op = schedule_.ops[rank][index];
  record_->ranks[rank].ops[index].start_ns = loop_->now_ns();
  if (op.kind == OpKind::kOffload) HostAdd(rank, CopyBytes(costs_.stages[op.stage], op.tensor));
  listener_->CopyStarted(rank, index, op);
  loop_->ScheduleAt(loop_->now_ns() + r.latency_ns, this, rank, d);
}

void CopyStreams::OnEvent(const Event& event) {
  const int rank = event.a;
  const auto d = static_cast<Direction>(event.b);
  const Op& op = schedule_.ops[rank][ranks_[rank].streams[d].queue.front()];
  transfers_->StartLinkFlow(Slot(rank, d), ranks_[rank].links[d], CopyBytes(costs_.stages[op.stage], op.tensor));
}

bool CopyStreams::FlowArrived(size_t slot) {
  if (!any_ || slot < first_slot_ || slot >= first_slot_ + ranks_.size() * 2) return false;
  const int rank = static_cast<int>((slot - first_slot_) / 2);
  const auto d = static_cast<Direction>((slot - first_slot_) % 2);
  Rank& r = ranks_[rank];
  Stream& stream = r.streams[d];
  SC_CHECK(stream.running && !stream.queue.empty(), "a copy's flow ends while it runs");
  const int index = stream.queue.front();
  stream.queue.pop_front();
  stream.running = false;
  r.done[index] = true;
  --r.unfinished;
  record_->ranks[rank].ops[index].end_ns = loop_->now_ns();
  const Op& op = schedule_.ops[rank][index];
  if (op.kind == OpKind::kReload) HostAdd(rank, -CopyBytes(costs_.stages[op.stage], op.tensor));
  listener_->CopyDone(rank, index, op);
  TryStart(rank, kToHost);
  TryStart(rank, kToDevice);  // its RELOAD may have waited for this OFFLOAD
  return true;
}

}  // namespace stagecraft::sim
