// One collective stream per rank (see collective_streams.h).
#include "stagecraft/sim/collective_streams.h"

#include <algorithm>

#include <fmt/format.h>

#include "stagecraft/base/check.h"
#include "stagecraft/base/error.h"
#include "stagecraft/scenario/limits.h"

namespace stagecraft::sim {

using schedules::Op;

CollectivePlans::CollectivePlans(const schedules::Schedule& s, const CostTable& costs, const Topology& topology,
                                 const std::vector<std::vector<int>>& replica_devices,
                                 const std::vector<std::vector<int>>& expert_devices) {
  if (!expert_devices.empty()) {
    SC_CHECK(static_cast<int>(expert_devices.size()) == s.ranks(), "the expert group of every rank");
    a2a_plans_.resize(static_cast<size_t>(s.stages()) * 2);
    std::vector<double> a2a_alone(a2a_plans_.size());  // each plan's time alone, once
    for (int stage = 0; stage < s.stages(); ++stage) {
      const StageCost& c = costs.stages[stage];
      const std::vector<int>& group = expert_devices[s.shape.RankOf(stage)];
      for (int pass = 0; pass < 2; ++pass) {
        const size_t at = A2aIndex(stage, pass == 0 ? schedules::Tensor::kActivations : schedules::Tensor::kGradients);
        CollectivePlan& plan = a2a_plans_[at];
        plan = PlanAllToAll(topology, group, c.a2a_bytes, pass == 0 ? c.a2a_forward : c.a2a_backward, costs.a2a_routing);
        for (const CollectivePhase& phase : plan.phases) max_flows_ = std::max(max_flows_, phase.flows.size());
        a2a_alone[at] = PlanAloneNs(topology, plan, costs.p2p_latency_ns);
      }
    }
    for (const auto& ops : s.ops) {
      for (const Op& op : ops) {
        if (schedules::IsAllToAll(op.kind)) alone_ns_ += a2a_alone[A2aIndex(op.stage, op.tensor)];
      }
    }
  }
  if (s.data_parallel <= 1) return;
  SC_CHECK(static_cast<int>(replica_devices.size()) == s.ranks(), "the replica devices of every rank");
  plans_.resize(static_cast<size_t>(s.stages()));
  for (int stage = 0; stage < s.stages(); ++stage) {
    const std::vector<int>& group = replica_devices[s.shape.RankOf(stage)];
    SC_CHECK(static_cast<int>(group.size()) == s.data_parallel, "one device per replica");
    const int64_t bytes = costs.stages[stage].ReduceBytes();
    // Nothing left to reduce (ZeRO-3: every backward reduce-scattered its own): no phase.
    plans_[stage] = bytes == 0          ? CollectivePlan{}
                    : costs.allreduce ? MeasuredAllReduce(*costs.allreduce, s.data_parallel, bytes)
                                      : PlanAllReduce(topology, group, bytes, costs.p2p_latency_ns);
    for (const CollectivePhase& phase : plans_[stage].phases) max_flows_ = std::max(max_flows_, phase.flows.size());
  }
  std::vector<double>& alone = stage_alone_ns_;
  alone.resize(plans_.size());
  for (int stage = 0; stage < s.stages(); ++stage) {
    alone[stage] = PlanAloneNs(topology, plans_[stage], costs.p2p_latency_ns);
    if (alone[stage] > static_cast<double>(kMaxOpNs)) {
      throw InputError(fmt::format(
          "{}: the all-reduce of stage {}'s gradients ({} bytes over {} replicas, {}) would take {:.3g} s, above the "
          "limit of 1 h per op",
          s.name, stage, costs.stages[stage].ReduceBytes(), s.data_parallel, AlgorithmName(plans_[stage].algorithm),
          alone[stage] * 1e-9));
    }
  }
  for (const auto& ops : s.ops) {
    for (const Op& op : ops) {
      if (schedules::ReducesGradients(op.kind) && op.stage >= 0 && op.stage < s.stages()) alone_ns_ += alone[op.stage];
    }
  }
}

const CollectivePlan& CollectivePlans::AllToAllOf(const Op& op) const {
  const size_t at = A2aIndex(op.stage, op.tensor);
  return at < a2a_plans_.size() ? a2a_plans_[at] : none_;
}

CollectiveStreams::CollectiveStreams(const schedules::Schedule& schedule, const CollectivePlans& plans,
                                     const CostTable& costs, Transfers* transfers, size_t first_slot, EventLoop* loop,
                                     Listener* listener, schedules::RunRecord* record)
    : schedule_(schedule),
      plans_(plans),
      costs_(costs),
      transfers_(transfers),
      first_slot_(first_slot),
      loop_(loop),
      listener_(listener),
      record_(record),
      streams_(static_cast<size_t>(schedule.ranks()) * kLanes) {}

void CollectiveStreams::Post(int rank, int index, const Op& op) {
  const bool a2a = schedules::IsAllToAll(op.kind);
  SC_CHECK(a2a || (schedules::ReducesGradients(op.kind) && !plans_.empty()),
           "a REDUCE_GRAD of a schedule with replicas, or an ALL_TO_ALL");
  const size_t lane = Lane(rank, a2a);
  Stream& stream = streams_[lane];
  stream.queue.push_back({index, a2a ? 1.0 : ShareLeft(rank, index, op)});
  if (stream.queue.size() == 1) StartNext(lane);
}

// With grad_reduce_overlap, Megatron-LM's buckets: the reduce ran beside the stage's last backward
// (the backward of the same stage nearest before it in the list, which has ended) for as long as
// that backward ran, at the all-reduce's own pace alone; what is left is the rest of it. Without
// it, all of it.
double CollectiveStreams::ShareLeft(int rank, int index, const Op& op) const {
  if (!costs_.grad_reduce_overlap) return 1.0;
  const double alone = plans_.AloneNsOf(op.stage);
  if (!(alone > 0)) return 1.0;
  const auto& ops = schedule_.ops[rank];
  for (int i = index - 1; i >= 0; --i) {
    if (!schedules::IsBackward(ops[i].kind) || ops[i].stage != op.stage) continue;
    const auto& ran = record_->ranks[rank].ops[i];
    const double hidden = static_cast<double>(std::max<int64_t>(0, ran.end_ns - ran.start_ns));
    return std::clamp(1.0 - hidden / alone, 0.0, 1.0);
  }
  return 1.0;
}

bool CollectiveStreams::Done(int rank, int stage, int version) const {
  return streams_[Lane(rank, false)].done.contains(Key(stage, version));
}

const CollectivePlan& CollectiveStreams::PlanOf(size_t lane) const {
  const Op& op = Running(lane);
  return IsA2aLane(lane) ? plans_.AllToAllOf(op) : plans_.of(op.stage);
}

void CollectiveStreams::StartNext(size_t lane) {
  Stream& stream = streams_[lane];
  if (stream.queue.empty()) return;
  record_->ranks[RankOfLane(lane)].ops[stream.queue.front().index].start_ns = loop_->now_ns();
  stream.phase = 0;
  StartPhase(lane);
}

// With a measured fit, a step pays the fit's latency; else the phase's slowest route plus the
// cost table's p2p latency.
int64_t CollectiveStreams::StepLatencyNs(const CollectivePhase& phase) const {
  if (costs_.p2p) return costs_.p2p->latency_ns;
  return phase.route_latency_ns + costs_.p2p_latency_ns;
}

void CollectiveStreams::StartPhase(size_t lane) {
  const CollectivePlan& plan = PlanOf(lane);
  Stream& stream = streams_[lane];
  if (stream.phase >= static_cast<int>(plan.phases.size())) {
    // Done: the op waiting for it may go on, and the next one starts.
    const int index = stream.queue.front().index;
    const Op& op = Running(lane);
    record_->ranks[RankOfLane(lane)].ops[index].end_ns = loop_->now_ns();
    stream.done.insert(IsA2aLane(lane) ? int64_t{index} : Key(op.stage, op.version));
    stream.queue.pop_front();
    stream.phase = -1;
    // The next one starts before the listener hears: what it posts on hearing queues behind it.
    StartNext(lane);
    listener_->CollectiveDone(RankOfLane(lane), index);
    return;
  }
  const CollectivePhase& phase = plan.phases[stream.phase];
  const double left = stream.queue.front().left;
  const auto measured = static_cast<int64_t>(std::llround(static_cast<double>(phase.measured_ns) * left));
  loop_->ScheduleAt(loop_->now_ns() + measured + phase.steps * StepLatencyNs(phase), this, static_cast<int32_t>(lane),
                    0);
}

void CollectiveStreams::OnEvent(const Event& event) {
  const auto lane = static_cast<size_t>(event.a);
  Stream& stream = streams_[lane];
  const CollectivePhase& phase = PlanOf(lane).phases[stream.phase];
  const double left = stream.queue.front().left;
  stream.flows_left = left > 0 ? phase.flows.size() : 0;
  if (stream.flows_left == 0) return EndPhase(lane);
  const size_t base = first_slot_ + lane * plans_.max_flows();
  for (size_t i = 0; i < phase.flows.size(); ++i) {
    const CollectiveFlow& f = phase.flows[i];
    const int64_t bytes = std::max<int64_t>(1, std::llround(static_cast<double>(f.bytes) * left));
    transfers_->StartFlow(base + i, f.src_device, f.dst_device, f.bytes == 0 ? 0 : bytes);
  }
}

bool CollectiveStreams::FlowArrived(size_t slot) {
  if (slot < first_slot_ || slot >= first_slot_ + streams_.size() * plans_.max_flows()) return false;
  const size_t lane = (slot - first_slot_) / plans_.max_flows();
  Stream& stream = streams_[lane];
  SC_CHECK(stream.flows_left > 0, "a flow of the running phase");
  if (--stream.flows_left == 0) EndPhase(lane);
  return true;
}

void CollectiveStreams::EndPhase(size_t lane) {
  ++streams_[lane].phase;
  StartPhase(lane);
}

}  // namespace stagecraft::sim
