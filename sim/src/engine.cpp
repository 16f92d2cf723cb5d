// The engine: the event loop with the compute streams, the transfers and the memory model
// beside it, joined by the schedule's data edges (edges.h). The model is described in engine.h.
#include "stagecraft/sim/engine.h"

#include <algorithm>
#include <cmath>
#include <optional>

#include "stagecraft/base/check.h"
#include "stagecraft/base/stop.h"
#include "stagecraft/schedules/edges.h"
#include "stagecraft/schedules/unit_index.h"
#include "stagecraft/sim/collective_streams.h"
#include "stagecraft/sim/compute_streams.h"
#include "stagecraft/sim/copy_streams.h"
#include "stagecraft/sim/event_loop.h"
#include "stagecraft/sim/memory_model.h"
#include "stagecraft/sim/run_bound.h"
#include "stagecraft/sim/transfers.h"

namespace stagecraft::sim {
namespace {

using schedules::Edge;
using schedules::Op;
using schedules::Schedule;

// A record with one timing per op of every rank, all unset.
RunRecord EmptyRecord(const Schedule& s) {
  RunRecord record;
  record.ranks.resize(s.ranks());
  for (int r = 0; r < s.ranks(); ++r) record.ranks[r].ops.resize(s.ops[r].size());
  return record;
}

// What the engine knows of one data edge, by EdgeKey.
struct EdgeState {
  int32_t send_index = -1, recv_index = -1;  // the SEND / RECV op on the producer's / consumer's rank
  int64_t ready_ns = -1;                     // when the consumer may read it (-1: not yet)
  int64_t bytes = 0;                         // the tensor's size (its buffers' memory)
};

class Engine final : StreamHooks, Transfers::Listener, CollectiveStreams::Listener, CopyStreams::Listener {
 public:
  Engine(const Schedule& s, const CostTable& costs, const Topology& topo, const SimConfig& config,
         const CollectivePlans& plans)
      : s_(s),
        costs_(costs),
        config_(config),
        units_(s),
        edges_(schedules::EdgeKeyCount(units_)),
        result_(EmptyRecord(s)),
        memory_(s, costs, config.record_memory, &result_, config.stop, config.rank_devices),
        transfers_(topo, costs.p2p_latency_ns,
                   edges_.size() + CollectiveStreams::SlotsNeeded(s, plans) + CopyStreams::SlotsNeeded(s), &loop_, this,
                   costs.p2p, config.rank_devices),
        streams_(s, costs, &loop_, this, &result_, config.rank_devices, config.time_slice_ns),
        collectives_(s, plans, costs, &transfers_, edges_.size(), &loop_, this, &result_),
        copies_(s, costs, topo, &transfers_, edges_.size() + CollectiveStreams::SlotsNeeded(s, plans), &loop_, this,
                &result_, config.rank_devices, config.copies_hold_compute) {}

  RunRecord Run() {
    ThrowIfStopped(config_.stop);
    streams_.Start();
    loop_.StopWhen(config_.stop);
    loop_.Run();
    streams_.CheckAllDone();
    result_.events = loop_.events_processed();
    ThrowIfStopped(config_.stop);
    Finish();
    return std::move(result_);
  }

 private:
  size_t Key(const Edge& edge) const { return schedules::EdgeKey(units_, edge); }
  int64_t Bytes(const Edge& edge) const { return costs_.stages[edge.from_stage].send_bytes; }

  // ---- compute streams ------------------------------------------------------------------
  // An op reading from its own rank waits for the producer's end; across ranks, for the arrival.
  bool InputReady(int rank, int index, const Op& op) override {
    if (!copies_.Ready(rank, index)) return false;  // a RELOAD of what it reads is still on its way
    if ((schedules::Info(op.kind).reads & schedules::kReducedGrads) != 0) {
      if (!schedules::ReadsReduceGrad(s_, op)) return true;
      const Op reduce = schedules::ReduceGradOf(op);
      return collectives_.Done(rank, reduce.stage, reduce.version);
    }
    const std::optional<Edge> edge = schedules::InputEdge(s_.shape, op);
    return !edge || edges_[Key(*edge)].ready_ns >= 0;
  }

  // With a measured p2p fit, the part of a transfer that does not overlap the receiver's
  // compute is copied by the receiver once it reaches the consumer.
  int64_t InputCopyNs(int /*rank*/, const Op& op) override {
    const std::optional<Edge> edge = schedules::InputEdge(s_.shape, op);
    if (!edge || !edge->CrossesRanks() || !costs_.p2p || costs_.p2p->DataBytesPerS() <= 0) return 0;
    return std::llround((1 - costs_.p2p->overlap) * static_cast<double>(Bytes(*edge)) * 1e9 /
                        costs_.p2p->DataBytesPerS());
  }
  // The part that overlaps: what crosses the link before the receiver takes over.
  int64_t LinkBytes(const Edge& edge) const {
    if (!costs_.p2p) return Bytes(edge);
    return std::llround(costs_.p2p->overlap * static_cast<double>(Bytes(edge)));
  }

  void ComputeStarted(int rank, int /*index*/, const Op& op, int64_t in_hand_ns) override {
    const std::optional<Edge> edge = schedules::InputEdge(s_.shape, op);
    if (edge && edge->CrossesRanks() && InputCopyNs(rank, op) > 0) {
      // The receive completes when the receiver's copy does, before the runtime's work and the op.
      result_.ranks[rank].ops[edges_[Key(*edge)].recv_index].end_ns = in_hand_ns;
    }
    if (edge && edge->CrossesRanks()) memory_.Free(loop_.now_ns(), rank, Bytes(*edge));  // receive buffer consumed
    memory_.ComputeStarted(loop_.now_ns(), rank, op);
  }

  void ComputeFinished(int rank, int /*index*/, const Op& op) override {
    const std::optional<Edge> edge = schedules::OutputEdge(s_.shape, op);
    if (edge && !edge->CrossesRanks()) edges_[Key(*edge)].ready_ns = loop_.now_ns();
    memory_.ComputeFinished(loop_.now_ns(), rank, op);
  }

  // A SEND holds its buffer from post to arrival, a RECV from post to its consumer's start.
  void Posted(int rank, int index, const Op& op) override {
    if (schedules::IsCollective(op.kind)) return collectives_.Post(rank, index, op);
    if (schedules::IsCopy(op.kind)) return copies_.Post(rank, index, op);
    const bool send = schedules::IsSend(op.kind);
    const std::optional<Edge> edge = schedules::CommEdge(s_.shape, op);
    SC_CHECK(edge && edge->CrossesRanks() && op.peer == schedules::PeerOf(s_.shape, op),
             "a SEND / RECV carries an edge to / from its peer rank");
    const size_t key = Key(*edge);
    const int64_t now = loop_.now_ns();
    (send ? edges_[key].send_index : edges_[key].recv_index) = index;
    edges_[key].bytes = Bytes(*edge);
    memory_.Allocate(now, rank, Bytes(*edge));
    if (!send) result_.ranks[rank].ops[index].start_ns = now;
    if (const int64_t measured = costs_.MeasuredTransferNs(rank, index); send && measured >= 0) {
      transfers_.SetMeasuredNs(key, measured);
    }
    transfers_.Post(key, send ? Transfers::End::kSend : Transfers::End::kRecv, edge->from_rank, edge->to_rank,
                    LinkBytes(*edge));
  }

  // ---- transfers (rank r runs on device config_.rank_devices[r], or r) --------------------
  // ---- collectives -------------------------------------------------------------------------
  void CollectiveDone(int rank, int /*index*/) override { streams_.Wake(rank); }
  bool AllToAllDone(int rank, int index) override { return collectives_.AllToAllDone(rank, index); }

  void TransferStarted(size_t key) override {
    result_.ranks[transfers_[key].src_rank].ops[edges_[key].send_index].start_ns = loop_.now_ns();
  }

  // ---- copies (host memory is theirs): an OFFLOAD frees device memory at its end, a RELOAD
  // holds it from its start.
  int64_t CopyBytesOf(const Op& op) const { return CopyBytes(costs_.stages[op.stage], op.tensor); }
  void CopyStarted(int rank, int /*index*/, const Op& op) override {
    if (op.kind == schedules::OpKind::kReload) memory_.Allocate(loop_.now_ns(), rank, CopyBytesOf(op));
  }
  void CopyDone(int rank, int /*index*/, const Op& op) override {
    if (op.kind == schedules::OpKind::kOffload) memory_.Free(loop_.now_ns(), rank, CopyBytesOf(op));
    streams_.Wake(rank);
  }

  void TransferArrived(size_t key) override {
    if (collectives_.FlowArrived(key) || copies_.FlowArrived(key)) return;
    const Transfers::Transfer& t = transfers_[key];
    EdgeState& edge = edges_[key];
    const int64_t now = loop_.now_ns();
    result_.ranks[t.src_rank].ops[edge.send_index].end_ns = now;
    result_.ranks[t.dst_rank].ops[edge.recv_index].end_ns = now;
    memory_.Free(now, t.src_rank, edge.bytes);
    edge.ready_ns = now;
    streams_.Wake(t.dst_rank);
  }

  // The span, busy times, in-flight peaks and OOM, as for a measured run.
  void Finish() { schedules::FinishRunRecord(s_, config_.rank_memory_bytes, &result_); }

  const Schedule& s_;
  const CostTable& costs_;
  const SimConfig& config_;
  const schedules::UnitIndex units_;
  std::vector<EdgeState> edges_;  // by EdgeKey
  RunRecord result_;
  EventLoop loop_;
  MemoryModel memory_;
  Transfers transfers_;
  ComputeStreams streams_;
  CollectiveStreams collectives_;
  CopyStreams copies_;
};

}  // namespace

// With replicas and no rings given (nor rank devices), replica i of rank r on device i x ranks + r
// (SimConfig::replica_devices).
RunRecord Simulate(const Schedule& schedule, const CostTable& costs, const Topology& topology, const SimConfig& config) {
  std::vector<std::vector<int>> replicas = config.replica_devices;
  SC_CHECK(!replicas.empty() || !config.rank_devices.empty() ||
               topology.devices() >= int64_t{schedule.ranks()} * schedule.data_parallel,
           "a device per replica's rank");
  if (replicas.empty() && schedule.data_parallel > 1 && config.rank_devices.empty()) {
    replicas.resize(static_cast<size_t>(schedule.ranks()));
    for (int r = 0; r < schedule.ranks(); ++r) {
      for (int i = 0; i < schedule.data_parallel; ++i) replicas[r].push_back(i * schedule.ranks() + r);
    }
  }
  return Simulate(schedule, costs, topology, config,
                  CollectivePlans(schedule, costs, topology, replicas, config.expert_devices));
}

RunRecord Simulate(const Schedule& schedule, const CostTable& costs, const Topology& topology, const SimConfig& config,
                   const CollectivePlans& plans) {
  SC_CHECK(schedule.lowered, "Simulate needs a lowered schedule");
  SC_CHECK(static_cast<int>(costs.stages.size()) == schedule.stages(), "one cost entry per stage");
  if (config.rank_devices.empty()) {
    SC_CHECK(topology.devices() >= schedule.ranks(), "a device per rank");
  } else {
    SC_CHECK(static_cast<int>(config.rank_devices.size()) == schedule.ranks(), "a device named for each rank");
    for (int d : config.rank_devices) SC_CHECK(d >= 0 && d < topology.devices(), "each rank on a device of the topology");
  }
  SC_CHECK(plans.empty() == (schedule.data_parallel <= 1), "a plan per stage with replicas");
  // Every time the engine computes stays within the bound, so nothing reachable from the input
  // can overflow: a run that could last over a year is refused here instead.
  ThrowIfStopped(config.stop);
  CheckRunBound(schedule, costs, topology, config.rank_devices, plans.AloneNs());
  ThrowIfStopped(config.stop);
  return Engine(schedule, costs, topology, config, plans).Run();
}

}  // namespace stagecraft::sim
