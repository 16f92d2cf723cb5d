// The discrete-event engine: compute streams, transfers with shared links, memory over time.
// The model is described in engine.h.
#include "stagecraft/sim/engine.h"

#include <algorithm>
#include <cmath>
#include <queue>

#include <fmt/format.h>

#include "stagecraft/base/check.h"
#include "stagecraft/schedules/unit_index.h"

namespace stagecraft::sim {
namespace {

using schedules::Op;
using schedules::OpKind;
using schedules::Schedule;

enum class EventType : uint8_t { kComputeDone, kDataStart, kTransferDone };

struct Event {
  int64_t time_ns;
  uint64_t seq;
  EventType type;
  int a;         // rank (compute) or transfer id
  int b;         // op index (compute)
  uint32_t gen;  // transfer generation: a stale completion is skipped (cancel = ignore)
  bool operator>(const Event& o) const { return time_ns != o.time_ns ? time_ns > o.time_ns : seq > o.seq; }
};

struct Transfer {
  int src = 0, dst = 0;
  int send_index = -1, recv_index = -1;  // op positions on src / dst
  int consumer_unit = 0;
  bool forward = true;
  int64_t bytes = 0;
  int64_t send_post = -1, recv_post = -1;
  double remaining = 0, rate = 0;  // bytes, bytes per ns
  int64_t last_update = 0;
  uint32_t gen = 0;
  bool in_data_phase = false;
};

class Engine {
 public:
  Engine(const Schedule& s, const CostTable& costs, const Topology& topo, const SimConfig& config)
      : s_(s), costs_(costs), topo_(topo), config_(config), unit_(s), units_(unit_.size()) {
    SC_CHECK(s.lowered, "Simulate needs a lowered schedule");
    SC_CHECK(static_cast<int>(costs.stages.size()) == s.stages(), "one cost entry per stage");
    SC_CHECK(topo.devices() >= s.ranks(), "a device per rank");
    const int ranks = s.ranks();
    result_.ranks.resize(ranks);
    for (int r = 0; r < ranks; ++r) result_.ranks[r].ops.resize(s.ops[r].size());
    next_.assign(ranks, 0);
    waiting_.assign(ranks, false);
    memory_.assign(ranks, 0);
    inflight_.assign(ranks, 0);
    f_end_.assign(units_, -1);
    back_end_.assign(units_, -1);
    arrival_f_.assign(units_, -1);
    arrival_b_.assign(units_, -1);
    xfer_f_.assign(units_, -1);
    xfer_b_.assign(units_, -1);
    link_active_.resize(topo.links().size());
    InitWeights();
  }

  RunRecord Run() {
    for (int r = 0; r < s_.ranks(); ++r) Advance(r);
    while (!queue_.empty()) {
      const Event e = queue_.top();
      queue_.pop();
      SC_CHECK(e.time_ns >= now_, "time never goes backwards");
      now_ = e.time_ns;
      ++result_.events;
      switch (e.type) {
        case EventType::kComputeDone: ComputeDone(e.a, e.b); break;
        case EventType::kDataStart: DataStart(e.a); break;
        case EventType::kTransferDone:
          if (e.gen == xfers_[e.a].gen) TransferDone(e.a);
          break;
      }
    }
    for (int r = 0; r < s_.ranks(); ++r) {
      SC_CHECK(next_[r] == s_.ops[r].size(),
               fmt::format("rank {} stopped at op {}: the schedule deadlocks (validate it first)", r, next_[r]));
    }
    Finish();
    return std::move(result_);
  }

 private:
  const StageCost& Cost(int stage) const { return costs_.stages[stage]; }

  int64_t Duration(const Op& op) const {
    const StageCost& c = Cost(op.stage);
    switch (op.kind) {
      case OpKind::kF: return c.forward_ns;
      case OpKind::kB: return c.backward_input_ns + c.backward_weight_ns;
      case OpKind::kI: return c.backward_input_ns;
      case OpKind::kW: return c.backward_weight_ns;
      case OpKind::kStep: return c.step_ns;
      default: return 0;
    }
  }

  void Push(int64_t time, EventType type, int a, int b = 0, uint32_t gen = 0) {
    queue_.push(Event{time, seq_++, type, a, b, gen});
  }

  // ---- memory -------------------------------------------------------------------------
  void InitWeights() {
    const int stages = s_.stages();
    readers_left_.assign(stages, {});
    live_versions_.assign(stages, 1);
    newest_.assign(stages, 0);
    for (const auto& rank_ops : s_.ops) {
      for (const Op& op : rank_ops) {
        if (!schedules::IsCompute(op.kind)) continue;
        auto& readers = readers_left_[op.stage];
        if (readers.size() <= static_cast<size_t>(op.version)) readers.resize(op.version + 1, 0);
        ++readers[op.version];
      }
    }
    for (int stage = 0; stage < stages; ++stage) {
      const StageCost& c = Cost(stage);
      const int rank = s_.shape.RankOf(stage);
      memory_[rank] += c.weight_bytes + c.grad_bytes + c.optimizer_bytes;
      result_.ranks[rank].peak_weight_versions = 1;
    }
    for (int r = 0; r < s_.ranks(); ++r) AddMemory(r, 0);
  }

  void AddMemory(int rank, int64_t delta) {
    memory_[rank] += delta;
    RankRecord& rr = result_.ranks[rank];
    rr.peak_memory_bytes = std::max(rr.peak_memory_bytes, memory_[rank]);
    if (!config_.record_memory) return;
    auto& samples = result_.ranks[rank].memory;
    if (!samples.empty() && samples.back().time_ns == now_) {
      samples.back().bytes = memory_[rank];
    } else {
      samples.push_back({now_, memory_[rank]});
    }
  }

  void ReadDone(const Op& op) {
    auto& left = readers_left_[op.stage][op.version];
    if (--left == 0 && op.version != newest_[op.stage]) {
      --live_versions_[op.stage];
      AddMemory(s_.shape.RankOf(op.stage), -Cost(op.stage).weight_bytes);
    }
  }

  // A STEP adds the new version; the old newest goes at once when nobody reads it any more
  // (one net change, so an in-place update never shows two copies in the peak).
  void StepDone(const Op& op) {
    const int stage = op.stage;
    const int old = newest_[stage];
    newest_[stage] = std::max(newest_[stage], op.version);
    const auto& readers = readers_left_[stage];
    const bool old_freed = old >= static_cast<int>(readers.size()) || readers[old] == 0;
    if (!old_freed) {
      ++live_versions_[stage];
      AddMemory(s_.shape.RankOf(stage), Cost(stage).weight_bytes);
    }
    RankRecord& rr = result_.ranks[s_.shape.RankOf(stage)];
    rr.peak_weight_versions = std::max(rr.peak_weight_versions, live_versions_[stage]);
  }

  // ---- compute streams ----------------------------------------------------------------
  // Runs rank `r` forward from its next op at now_ until it starts a compute op or must wait.
  void Advance(int r) {
    waiting_[r] = false;
    const auto& ops = s_.ops[r];
    while (next_[r] < ops.size()) {
      const int index = static_cast<int>(next_[r]);
      const Op& op = ops[index];
      switch (op.kind) {
        case OpKind::kSendF:
        case OpKind::kSendB: PostSend(r, index, op); break;
        case OpKind::kRecvF:
        case OpKind::kRecvB: PostRecv(r, index, op); break;
        case OpKind::kStep:
          if (Cost(op.stage).step_ns > 0) {  // an optimizer step that takes time holds the stream
            StartCompute(r, index, op);
            ++next_[r];
            return;
          }
          result_.ranks[r].ops[index] = {now_, now_};
          StepDone(op);
          break;
        default:
          if (!InputReady(r, op)) {
            waiting_[r] = true;
            return;
          }
          StartCompute(r, index, op);
          ++next_[r];
          return;
      }
      ++next_[r];
    }
  }

  // Where a compute op's input comes from: the stage that produces it (-1: none, the op reads
  // only its own stage) and whether that stage lives on another rank.
  struct Input {
    int producer_stage = -1;
    bool forward = true;
    bool cross_rank = false;
  };
  Input InputOf(int r, const Op& op) const {
    Input in;
    if (op.kind == OpKind::kF && op.stage > 0) {
      in.producer_stage = op.stage - 1;
    } else if ((op.kind == OpKind::kB || op.kind == OpKind::kI) && op.stage + 1 < s_.stages()) {
      in.producer_stage = op.stage + 1;
      in.forward = false;
    }
    in.cross_rank = in.producer_stage >= 0 && s_.shape.RankOf(in.producer_stage) != r;
    return in;
  }

  bool InputReady(int r, const Op& op) const {
    const Input in = InputOf(r, op);
    if (in.producer_stage < 0) return true;
    if (in.cross_rank) return (in.forward ? arrival_f_ : arrival_b_)[unit_(op)] >= 0;
    return (in.forward ? f_end_ : back_end_)[unit_(in.producer_stage, op.step, op.microbatch)] >= 0;
  }

  void StartCompute(int r, int index, const Op& op) {
    const int64_t duration = Duration(op);
    result_.ranks[r].ops[index] = {now_, now_ + duration};
    if (const Input in = InputOf(r, op); in.cross_rank) {
      AddMemory(r, -xfers_[(in.forward ? xfer_f_ : xfer_b_)[unit_(op)]].bytes);  // recv buffer consumed
    }
    if (op.kind == OpKind::kF) {
      AddMemory(r, Cost(op.stage).activation_bytes);
      RankRecord& rr = result_.ranks[r];
      rr.peak_inflight = std::max(rr.peak_inflight, ++inflight_[r]);
      if (rr.first_f_start_ns < 0) rr.first_f_start_ns = now_;
    }
    Push(now_ + duration, EventType::kComputeDone, r, index);
  }

  void ComputeDone(int r, int index) {
    const Op& op = s_.ops[r][index];
    const StageCost& c = Cost(op.stage);
    const int64_t duration = Duration(op);
    RankRecord& rr = result_.ranks[r];
    rr.busy_ns += duration;
    rr.last_compute_end_ns = std::max(rr.last_compute_end_ns, now_);
    switch (op.kind) {
      case OpKind::kF: f_end_[unit_(op)] = now_; break;
      case OpKind::kB:
        back_end_[unit_(op)] = now_;
        --inflight_[r];
        AddMemory(r, -c.activation_bytes);
        break;
      case OpKind::kI:
        back_end_[unit_(op)] = now_;
        --inflight_[r];
        AddMemory(r, c.w_stash_bytes - c.activation_bytes);
        break;
      case OpKind::kW: AddMemory(r, -c.w_stash_bytes); break;
      case OpKind::kStep:
        StepDone(op);
        Advance(r);
        return;  // a STEP produces its version; it reads none
      default: break;
    }
    ReadDone(op);
    Advance(r);
  }

  // ---- transfers ----------------------------------------------------------------------
  int TransferFor(int index, const Op& op, bool send) {
    const bool forward = op.kind == OpKind::kSendF || op.kind == OpKind::kRecvF;
    // Identify the transfer by its consumer's unit.
    const int consumer_stage = send ? (forward ? op.stage + 1 : op.stage - 1) : op.stage;
    const size_t u = unit_(consumer_stage, op.step, op.microbatch);
    int& slot = forward ? xfer_f_[u] : xfer_b_[u];
    if (slot < 0) {
      slot = static_cast<int>(xfers_.size());
      Transfer t;
      t.forward = forward;
      t.consumer_unit = static_cast<int>(u);
      const int producer_stage = forward ? consumer_stage - 1 : consumer_stage + 1;
      t.bytes = Cost(producer_stage).send_bytes;
      t.src = s_.shape.RankOf(producer_stage);
      t.dst = s_.shape.RankOf(consumer_stage);
      xfers_.push_back(t);
    }
    Transfer& t = xfers_[slot];
    (send ? t.send_index : t.recv_index) = index;
    return slot;
  }

  void PostSend(int r, int index, const Op& op) {
    const int x = TransferFor(index, op, true);
    xfers_[x].send_post = now_;
    AddMemory(r, xfers_[x].bytes);
    if (xfers_[x].recv_post >= 0) StartTransfer(x);
  }

  void PostRecv(int r, int index, const Op& op) {
    const int x = TransferFor(index, op, false);
    xfers_[x].recv_post = now_;
    AddMemory(r, xfers_[x].bytes);
    result_.ranks[r].ops[index].start_ns = now_;
    if (xfers_[x].send_post >= 0) StartTransfer(x);
  }

  void StartTransfer(int x) {
    Transfer& t = xfers_[x];
    result_.ranks[t.src].ops[t.send_index].start_ns = now_;
    const int64_t latency = topo_.RouteLatencyNs(t.src, t.dst) + costs_.p2p_latency_ns;
    if (t.bytes <= 0) {
      Push(now_ + latency, EventType::kTransferDone, x, 0, t.gen);
    } else {
      Push(now_ + latency, EventType::kDataStart, x);
    }
  }

  void DataStart(int x) {
    Transfer& t = xfers_[x];
    t.in_data_phase = true;
    t.remaining = static_cast<double>(t.bytes);
    t.last_update = now_;
    const auto& route = topo_.Route(t.src, t.dst);
    for (int link : route) link_active_[link].push_back(x);
    UpdateRates(route);
  }

  void TransferDone(int x) {
    Transfer& t = xfers_[x];
    if (t.in_data_phase) {
      t.in_data_phase = false;
      const auto& route = topo_.Route(t.src, t.dst);
      for (int link : route) std::erase(link_active_[link], x);
      UpdateRates(route);
    }
    result_.ranks[t.src].ops[t.send_index].end_ns = now_;
    result_.ranks[t.dst].ops[t.recv_index].end_ns = now_;
    AddMemory(t.src, -t.bytes);
    (t.forward ? arrival_f_ : arrival_b_)[t.consumer_unit] = now_;
    if (waiting_[t.dst]) Advance(t.dst);
  }

  // Re-times every transfer crossing one of `links`: progress so far at the old rate, then the
  // new equal-share rate of its most loaded link and a fresh completion event.
  void UpdateRates(const std::vector<int>& links) {
    affected_.clear();
    for (int link : links) affected_.insert(affected_.end(), link_active_[link].begin(), link_active_[link].end());
    std::sort(affected_.begin(), affected_.end());
    affected_.erase(std::unique(affected_.begin(), affected_.end()), affected_.end());
    for (int y : affected_) {
      Transfer& t = xfers_[y];
      t.remaining = std::max(0.0, t.remaining - t.rate * static_cast<double>(now_ - t.last_update));
      t.last_update = now_;
      double rate = 0;
      bool first = true;
      for (int link : topo_.Route(t.src, t.dst)) {
        const double share = topo_.links()[link].bandwidth_bytes_per_s * 1e-9 / link_active_[link].size();
        rate = first ? share : std::min(rate, share);
        first = false;
      }
      t.rate = rate;
      ++t.gen;
      const int64_t left_ns = rate > 0 ? std::llround(t.remaining / rate) : 0;
      Push(now_ + left_ns, EventType::kTransferDone, y, 0, t.gen);
    }
  }

  void Finish() {
    bool any = false;
    int64_t start = 0, end = 0;
    for (int r = 0; r < s_.ranks(); ++r) {
      for (size_t i = 0; i < s_.ops[r].size(); ++i) {
        const OpKind kind = s_.ops[r][i].kind;
        if (!schedules::IsCompute(kind) && kind != OpKind::kStep) continue;
        const OpTiming& t = result_.ranks[r].ops[i];
        start = any ? std::min(start, t.start_ns) : t.start_ns;
        end = any ? std::max(end, t.end_ns) : t.end_ns;
        any = true;
      }
      RankRecord& rr = result_.ranks[r];
      rr.oom = config_.device_memory_bytes > 0 && rr.peak_memory_bytes > config_.device_memory_bytes;
    }
    result_.start_ns = start;
    result_.end_ns = end;
  }

  const Schedule& s_;
  const CostTable& costs_;
  const Topology& topo_;
  const SimConfig& config_;
  const schedules::UnitIndex unit_;
  size_t units_;
  RunRecord result_;
  std::priority_queue<Event, std::vector<Event>, std::greater<Event>> queue_;
  uint64_t seq_ = 0;
  int64_t now_ = 0;
  std::vector<size_t> next_;
  std::vector<bool> waiting_;
  std::vector<int64_t> memory_;
  std::vector<int> inflight_;
  std::vector<int64_t> f_end_, back_end_, arrival_f_, arrival_b_;
  std::vector<int> xfer_f_, xfer_b_;
  std::vector<Transfer> xfers_;
  std::vector<std::vector<int>> link_active_;
  std::vector<int> affected_;
  std::vector<std::vector<int>> readers_left_;
  std::vector<int> live_versions_, newest_;
};

}  // namespace

RunRecord Simulate(const Schedule& schedule, const CostTable& costs, const Topology& topology, const SimConfig& config) {
  return Engine(schedule, costs, topology, config).Run();
}

}  // namespace stagecraft::sim
