// The plan's floors (see plan_bounds.h).
#include "plan_bounds.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "stagecraft/base/check.h"
#include "stagecraft/schedules/analysis.h"
#include "stagecraft/sim/collective_streams.h"
#include "stagecraft/sim/compute_streams.h"

namespace stagecraft::harness::detail {

using schedules::Op;

namespace {

// A time the simulator computes in double and rounds: taken a little short, so that rounding
// never puts the floor above the run.
int64_t Short(double ns) { return std::max<int64_t>(0, static_cast<int64_t>(std::floor(ns * (1 - 1e-9))) - 2); }

// The stages rank `rank` holds.
std::vector<int> StagesOf(const schedules::Shape& shape, int rank) {
  std::vector<int> stages;
  for (int c = 0; c < shape.chunks; ++c) stages.push_back(shape.StageOf(rank, c));
  return stages;
}

}  // namespace

StageFloors FloorsOf(const sim::Scenario& sc, const sim::Topology& topo, const sim::CostTable& costs,
                     const schedules::Shape& shape) {
  StageFloors f;
  f.shape = shape;
  const int stages = shape.stages();
  SC_CHECK(static_cast<int>(costs.stages.size()) == stages, "a cost per stage");
  // Measured costs move ops off their costs (a spread, the runtime's work between ops, the
  // receiver's copy): no time floor is taken from them.
  f.timed = costs.op_time_cv <= 0 && costs.op_ns.empty() && costs.op_overhead_ns == 0 &&
            costs.rank_op_overhead_ns.empty() && !costs.p2p && !costs.allreduce;
  for (const sim::StageCost& c : costs.stages) {
    f.forward_ns.push_back(c.forward_ns);
    const int64_t split = c.backward_input_ns + c.backward_weight_ns;
    f.backward_ns.push_back(std::min(split, c.FullBackwardNs()));
    f.input_ns.push_back(std::min(c.backward_input_ns, c.FullBackwardNs()));
    f.step_ns.push_back(c.step_ns);
    f.static_bytes.push_back(c.weight_bytes + c.grad_bytes + c.optimizer_bytes);
    f.activation_bytes.push_back(c.activation_bytes);
  }
  const sim::PipelineSpec& p = sc.pipeline;
  const auto hop = [&](int from_stage, int to_stage) -> int64_t {
    const int from = shape.RankOf(from_stage), to = shape.RankOf(to_stage);
    if (from == to) return 0;
    const double bytes = static_cast<double>(costs.stages[from_stage].send_bytes);
    if (costs.p2p) return Short(static_cast<double>(costs.p2p->latency_ns));  // its data may overlap a wait
    const int a = p.DeviceOf(from), b = p.DeviceOf(to);
    const double bandwidth = topo.RouteBandwidth(a, b);
    const double data_ns = std::isfinite(bandwidth) && bandwidth > 0 ? bytes * 1e9 / bandwidth : 0;
    return Short(static_cast<double>(topo.RouteLatencyNs(a, b) + costs.p2p_latency_ns) + data_ns);
  };
  for (int s = 0; s + 1 < stages; ++s) {
    f.hop_forward_ns.push_back(hop(s, s + 1));
    f.hop_backward_ns.push_back(hop(s + 1, s));
  }
  return f;
}

void AddReduceFloors(const sim::Scenario& sc, const sim::Topology& topo, const sim::CostTable& costs, StageFloors* f) {
  const sim::PipelineSpec& p = sc.pipeline;
  if (p.replicas() <= 1 || !f->reduce_alone_ns.empty()) return;
  schedules::Schedule empty;  // the plans read the shape and the replicas only
  empty.shape = f->shape;
  empty.data_parallel = p.replicas();
  empty.ops.resize(static_cast<size_t>(f->shape.ranks));
  const sim::CollectivePlans plans(empty, costs, topo, p.ReplicaDevices());
  // With grad_reduce_overlap the simulator leaves a REDUCE_GRAD only what its stage's last backward
  // did not cover, and that backward may run longer than its cost (sharing the device): nothing
  // of the reduce is certain to be left after it, so the floors wait for none of it.
  for (int s = 0; s < f->shape.stages(); ++s) {
    f->reduce_alone_ns.push_back(costs.grad_reduce_overlap ? 0.0 : plans.AloneNsOf(s));
  }
}

int64_t MemoryFloor(const StageFloors& f) {
  int64_t most = 0;
  for (int r = 0; r < f.shape.ranks; ++r) {
    int64_t held = 0, least_activation = std::numeric_limits<int64_t>::max();
    for (const int s : StagesOf(f.shape, r)) {
      held += f.static_bytes[s];
      least_activation = std::min(least_activation, f.activation_bytes[s]);
    }
    most = std::max(most, held + least_activation);
  }
  return most;
}

int64_t TimeFloorNs(const StageFloors& f, int m, int steps) {
  if (!f.timed) return 0;
  const int stages = f.shape.stages();
  int64_t all_forward = 0;
  for (int s = 0; s < stages; ++s) all_forward += f.forward_ns[s] + (s + 1 < stages ? f.hop_forward_ns[s] : 0);
  int64_t floor = 0;
  for (int r = 0; r < f.shape.ranks; ++r) {
    const std::vector<int> mine = StagesOf(f.shape, r);
    const int first = *std::min_element(mine.begin(), mine.end());
    const int last = *std::max_element(mine.begin(), mine.end());
    int64_t head = 0, forward = 0, backward = 0, step = 0;
    for (int s = 0; s < first; ++s) head += f.forward_ns[s] + f.hop_forward_ns[s];
    for (const int s : mine) {
      forward += f.forward_ns[s];
      backward += f.backward_ns[s];
      step += f.step_ns[s];
    }
    // The gradients of the last stage must reach rank r's last stage before its first backward.
    int64_t first_backward = all_forward;
    for (int s = stages - 1; s > last; --s) first_backward += f.input_ns[s] + f.hop_backward_ns[s - 1];
    // After the rank's last backward, that stage's all-reduce alone and its STEP.
    int64_t tail = std::numeric_limits<int64_t>::max();
    for (const int s : mine) {
      tail = std::min(tail, (f.reduce_alone_ns.empty() ? 0 : Short(f.reduce_alone_ns[s])) + f.step_ns[s]);
    }
    const int64_t per_step = int64_t{m} * (forward + backward) + step;
    floor = std::max(floor, head + steps * per_step);
    floor = std::max(floor, first_backward + steps * int64_t{m} * backward + tail);
  }
  return floor;
}

int64_t OrderMemoryFloor(const StageFloors& f, const schedules::Schedule& s) {
  int64_t most = 0;
  for (int r = 0; r < s.ranks(); ++r) {
    int64_t held = 0;
    for (const int stage : StagesOf(f.shape, r)) held += f.static_bytes[stage];
    const schedules::HeldPeak peak = schedules::PeakHeld(s.ops[r], s.ops[r].size(),
                                                         [&](const Op& op) { return f.activation_bytes[op.stage]; });
    most = std::max(most, held + peak.weight);
  }
  return most;
}

namespace {

// The critical path of one order (OrderTimeFloorNs), rank by rank as far as each can go.
class CriticalPath {
 public:
  CriticalPath(const StageFloors& f, const schedules::Schedule& s)
      : f_(f), s_(s), stages_(s.stages()), m_(s.microbatches), defer_steps_(!f.reduce_alone_ns.empty()),
        forward_end_(Units(), -1), backward_end_(Units(), -1), last_backward_(stages_, 0),
        next_(s.ranks(), 0), clock_(s.ranks(), 0), deferred_(s.ranks()) {}

  int64_t Run() {
    for (size_t left = s_.OpCount(); left > 0;) {
      bool moved = false;
      for (int r = 0; r < s_.ranks(); ++r) {
        const std::vector<Op>& ops = s_.ops[r];
        for (; next_[r] < ops.size() && Try(r, ops[next_[r]]); ++next_[r], --left) moved = true;
      }
      if (!moved) return -1;  // no rank can go on: the order deadlocks
    }
    for (int r = 0; r < s_.ranks(); ++r) {
      for (const Op& step : deferred_[r]) RunStep(r, step);
    }
    return *std::max_element(clock_.begin(), clock_.end());
  }

 private:
  size_t Units() const { return static_cast<size_t>(s_.steps) * stages_ * m_; }
  size_t Unit(const Op& op, int stage) const { return (static_cast<size_t>(op.step) * stages_ + stage) * m_ + op.microbatch; }

  void RunStep(int r, const Op& step) {
    int64_t ready = clock_[r];
    if (defer_steps_) ready = std::max(ready, last_backward_[step.stage] + Short(f_.reduce_alone_ns[step.stage]));
    clock_[r] = ready + f_.step_ns[step.stage];
  }

  // Runs `op` on rank r when its input is there; false when it is not yet.
  bool Try(int r, const Op& op) {
    int64_t ready = clock_[r];
    const bool input_backward = schedules::Info(op.kind).phase == schedules::Phase::kInputBackward;  // B or I
    if (schedules::IsForward(op.kind) && op.stage > 0) {
      const int64_t in = forward_end_[Unit(op, op.stage - 1)];
      if (in < 0) return false;
      ready = std::max(ready, in + f_.hop_forward_ns[op.stage - 1]);
    } else if (input_backward && op.stage + 1 < stages_) {
      const int64_t in = backward_end_[Unit(op, op.stage + 1)];
      if (in < 0) return false;
      ready = std::max(ready, in + f_.hop_backward_ns[op.stage]);
    }
    if (schedules::ProducesVersion(op.kind)) {
      // With replicas, lowering moves a STEP to just before its stage's next compute op (or to
      // the end), after the REDUCE_GRAD it waits for (lower.h).
      if (defer_steps_) {
        deferred_[r].push_back(op);
      } else {
        RunStep(r, op);
      }
      return true;
    }
    if (!schedules::IsCompute(op.kind)) return true;  // transfers and collectives hold no compute stream
    for (auto it = deferred_[r].begin(); it != deferred_[r].end();) {
      if (it->stage != op.stage) {
        ++it;
        continue;
      }
      RunStep(r, *it);
      ready = std::max(ready, clock_[r]);
      it = deferred_[r].erase(it);
    }
    int64_t duration = 0;
    switch (schedules::Info(op.kind).cost) {
      case schedules::CostField::kForward: duration = f_.forward_ns[op.stage]; break;
      case schedules::CostField::kBackward: duration = f_.backward_ns[op.stage]; break;
      case schedules::CostField::kBackwardInput: duration = f_.input_ns[op.stage]; break;
      default: duration = f_.backward_ns[op.stage] - f_.input_ns[op.stage]; break;  // W
    }
    clock_[r] = ready + std::max<int64_t>(0, duration);
    if (schedules::IsForward(op.kind)) forward_end_[Unit(op, op.stage)] = clock_[r];
    if (input_backward) backward_end_[Unit(op, op.stage)] = clock_[r];
    if (schedules::IsBackward(op.kind)) last_backward_[op.stage] = clock_[r];
    return true;
  }

  const StageFloors& f_;
  const schedules::Schedule& s_;
  int stages_, m_;
  bool defer_steps_;
  std::vector<int64_t> forward_end_, backward_end_, last_backward_;
  std::vector<size_t> next_;
  std::vector<int64_t> clock_;
  std::vector<std::vector<Op>> deferred_;  // per rank, STEPs waiting for their place
};

}  // namespace

int64_t OrderTimeFloorNs(const StageFloors& f, const schedules::Schedule& s) {
  if (!f.timed) return 0;
  return CriticalPath(f, s).Run();
}

}  // namespace stagecraft::harness::detail
