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
                                 const std::vector<std::vector<int>>& replica_devices) {
  if (s.data_parallel <= 1) return;
  SC_CHECK(static_cast<int>(replica_devices.size()) == s.ranks(), "the replica devices of every rank");
  plans_.resize(static_cast<size_t>(s.stages()));
  for (int stage = 0; stage < s.stages(); ++stage) {
    const std::vector<int>& group = replica_devices[s.shape.RankOf(stage)];
    SC_CHECK(static_cast<int>(group.size()) == s.data_parallel, "one device per replica");
    const int64_t bytes = costs.stages[stage].grad_bytes;
    plans_[stage] = costs.allreduce ? MeasuredAllReduce(*costs.allreduce, s.data_parallel, bytes)
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
          s.name, stage, costs.stages[stage].grad_bytes, s.data_parallel, AlgorithmName(plans_[stage].algorithm),
          alone[stage] * 1e-9));
    }
  }
  for (const auto& ops : s.ops) {
    for (const Op& op : ops) {
      if (schedules::ReducesGradients(op.kind) && op.stage >= 0 && op.stage < s.stages()) alone_ns_ += alone[op.stage];
    }
  }
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
      streams_(schedule.ranks()) {}

void CollectiveStreams::Post(int rank, int index, const Op& op) {
  SC_CHECK(schedules::ReducesGradients(op.kind) && !plans_.empty(), "a REDUCE_GRAD of a schedule with replicas");
  Stream& stream = streams_[rank];
  stream.queue.push_back(index);
  if (stream.queue.size() == 1) StartNext(rank);
}

bool CollectiveStreams::Done(int rank, int stage, int version) const {
  return streams_[rank].done.contains(Key(stage, version));
}

void CollectiveStreams::StartNext(int rank) {
  Stream& stream = streams_[rank];
  if (stream.queue.empty()) return;
  record_->ranks[rank].ops[stream.queue.front()].start_ns = loop_->now_ns();
  stream.phase = 0;
  StartPhase(rank);
}

// With a measured fit, a step pays the fit's latency; else the phase's slowest route plus the
// cost table's p2p latency.
int64_t CollectiveStreams::StepLatencyNs(const CollectivePhase& phase) const {
  if (costs_.p2p) return costs_.p2p->latency_ns;
  return phase.route_latency_ns + costs_.p2p_latency_ns;
}

void CollectiveStreams::StartPhase(int rank) {
  const CollectivePlan& plan = plans_.of(Running(rank).stage);
  Stream& stream = streams_[rank];
  if (stream.phase >= static_cast<int>(plan.phases.size())) {
    // Done: the STEP reading it may go on, and the next one starts.
    const int index = stream.queue.front();
    const Op& op = Running(rank);
    record_->ranks[rank].ops[index].end_ns = loop_->now_ns();
    stream.done.insert(Key(op.stage, op.version));
    stream.queue.pop_front();
    stream.phase = -1;
    listener_->CollectiveDone(rank, index);
    StartNext(rank);
    return;
  }
  const CollectivePhase& phase = plan.phases[stream.phase];
  loop_->ScheduleAt(loop_->now_ns() + phase.measured_ns + phase.steps * StepLatencyNs(phase), this, rank, 0);
}

void CollectiveStreams::OnEvent(const Event& event) {
  const int rank = event.a;
  Stream& stream = streams_[rank];
  const CollectivePhase& phase = plans_.of(Running(rank).stage).phases[stream.phase];
  stream.flows_left = phase.flows.size();
  if (phase.flows.empty()) return EndPhase(rank);
  const size_t base = first_slot_ + static_cast<size_t>(rank) * plans_.max_flows();
  for (size_t i = 0; i < phase.flows.size(); ++i) {
    const CollectiveFlow& f = phase.flows[i];
    transfers_->StartFlow(base + i, f.src_device, f.dst_device, f.bytes);
  }
}

bool CollectiveStreams::FlowArrived(size_t slot) {
  if (slot < first_slot_ || slot >= first_slot_ + streams_.size() * plans_.max_flows()) return false;
  const int rank = static_cast<int>((slot - first_slot_) / plans_.max_flows());
  Stream& stream = streams_[rank];
  SC_CHECK(stream.flows_left > 0, "a flow of the running phase");
  if (--stream.flows_left == 0) EndPhase(rank);
  return true;
}

void CollectiveStreams::EndPhase(int rank) {
  ++streams_[rank].phase;
  StartPhase(rank);
}

}  // namespace stagecraft::sim
