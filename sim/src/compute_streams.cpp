// One compute stream per rank (see compute_streams.h).
#include "stagecraft/sim/compute_streams.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <numbers>

#include <fmt/format.h>

#include "stagecraft/base/check.h"
#include "stagecraft/base/split_mix.h"
#include "stagecraft/schedules/all_to_all.h"
#include "stagecraft/schedules/shared_devices.h"
#include "stagecraft/schedules/staleness.h"
#include "stagecraft/schedules/weights.h"
#include "stagecraft/sim/memory_model.h"

namespace stagecraft::sim {

using schedules::Op;
using schedules::OpKind;

namespace {

// A uniform in (0, 1) from a 64-bit value.
double Unit(uint64_t x) { return (static_cast<double>(x >> 11) + 0.5) * 0x1.0p-53; }

}  // namespace

double OpTimeFactor(double cv, uint64_t seed, int rank, int index) {
  if (cv <= 0) return 1;
  const uint64_t place = static_cast<uint64_t>(rank) << 32 | static_cast<uint32_t>(index);
  const uint64_t key = SplitMix64(seed ^ SplitMix64(place));
  // Box-Muller: one standard normal from two uniforms.
  const double z = std::sqrt(-2 * std::log(Unit(key))) * std::cos(2 * std::numbers::pi * Unit(SplitMix64(key)));
  // Log-normal of mean 1 and coefficient of variation cv.
  const double sigma2 = std::log1p(cv * cv);
  return std::exp(std::sqrt(sigma2) * z - sigma2 / 2);
}

int64_t OpDurationNs(const StageCost& cost, OpKind kind, bool step_in_place) {
  switch (schedules::Info(kind).cost) {
    case schedules::CostField::kForward: return cost.forward_ns;
    case schedules::CostField::kBackward: return cost.FullBackwardNs();
    case schedules::CostField::kBackwardInput: return cost.backward_input_ns;
    case schedules::CostField::kBackwardWeight: return cost.backward_weight_ns;
    case schedules::CostField::kStep: return cost.step_ns + (step_in_place ? 0 : cost.version_copy_ns);
    case schedules::CostField::kNone: return 0;
  }
  return 0;
}

ComputeStreams::ComputeStreams(const schedules::Schedule& schedule, const CostTable& costs, EventLoop* loop,
                               StreamHooks* hooks, schedules::RunRecord* record, const std::vector<int>& rank_devices,
                               int64_t time_slice_ns)
    : schedule_(schedule), costs_(costs), loop_(loop), hooks_(hooks), record_(record), streams_(schedule.ranks()),
      steps_in_place_(schedules::StepsInPlace(schedule)),
      stash_depths_(costs.rank_stash.empty() ? std::vector<std::vector<double>>{} : StashDepths(schedule)) {
  if (KeepsWeightVelocity(schedule, costs)) {
    for (int r = 0; r < schedule.ranks(); ++r) correction_spans_.push_back(schedules::CorrectionSpans(schedule, r));
  }
  SC_CHECK(static_cast<int>(costs.stages.size()) == schedule.stages(), "one cost entry per stage");
  SC_CHECK(static_cast<int>(record->ranks.size()) == schedule.ranks(), "one rank record per rank");
  for (int r = 0; r < schedule.ranks(); ++r) {
    const auto& ops = schedule.ops[r];
    if (std::none_of(ops.begin(), ops.end(), [](const Op& op) { return schedules::IsAllToAll(op.kind); })) continue;
    paired_.resize(schedule.ranks());
    a2a_posted_.resize(schedule.ranks());
    paired_[r] = costs.a2a_overlap ? schedules::PairedAllToAlls(schedule, r) : std::vector<int>(ops.size(), -1);
    a2a_posted_[r].assign(ops.size(), false);
  }
  for (int r = 0; r < schedule.ranks(); ++r) {
    SC_CHECK(record->ranks[r].ops.size() == schedule.ops[r].size(), "one op timing per op");
  }
  SC_CHECK(rank_devices.empty() || static_cast<int>(rank_devices.size()) == schedule.ranks(), "a device per rank");
  schedules::SharedDevices devices = schedules::FindSharedDevices(rank_devices, schedule.ranks());
  shared_of_ = std::move(devices.of_rank);
  shared_.resize(devices.ranks.size());
  SC_CHECK(time_slice_ns >= 0, "a time slice of 0 or more");
  time_slice_ns_ = time_slice_ns;
}

void ComputeStreams::Start() {
  for (int r = 0; r < schedule_.ranks(); ++r) Advance(r);
}

void ComputeStreams::Wake(int rank) {
  if (streams_[rank].waiting) Advance(rank);
}

void ComputeStreams::CheckAllDone() const {
  for (int r = 0; r < schedule_.ranks(); ++r) {
    SC_CHECK(streams_[r].next == schedule_.ops[r].size(),
             fmt::format("rank {} stopped at op {}: the schedule deadlocks (validate it first)", r, streams_[r].next));
  }
}

void ComputeStreams::OnEvent(const Event& event) {
  const int rank = event.a;
  const int index = event.b;
  if (const int d = shared_of_[rank]; d >= 0) {
    SharedDevice& device = shared_[static_cast<size_t>(d)];
    Progress(device);
    std::erase_if(device.running, [&](const Running& r) { return r.rank == rank; });
    record_->ranks[rank].ops[index].end_ns = loop_->now_ns();
    Reschedule(device);
  }
  FinishOp(rank, index, schedule_.ops[rank][index]);
  Advance(rank);
}

void ComputeStreams::Join(int rank, int index) {
  const int d = shared_of_[rank];
  SharedDevice& device = shared_[static_cast<size_t>(d)];
  Progress(device);
  const schedules::OpTiming& planned = record_->ranks[rank].ops[index];  // {start, start + own duration}
  device.running.push_back({rank, index, static_cast<double>(planned.end_ns - planned.start_ns), EventId{}});
  if (time_slice_ns_ == 0) {
    Reschedule(device);
  } else if (device.running.size() == 1) {
    GiveTurn(d);  // the device was free: the op takes it now; else it waits its turn
  } else if (device.running.size() == 2) {
    // The holder had the device alone, its stop set at its op's end: now its turn ends too, at
    // the end of the turn it is in (alone, it took a new turn each time one ended).
    const int64_t now = loop_->now_ns();
    if (now >= device.turn_end_ns) device.turn_end_ns += ((now - device.turn_end_ns) / time_slice_ns_ + 1) * time_slice_ns_;
    ScheduleStop(d);
  }
}

void ComputeStreams::ScheduleStop(int device_index) {
  SharedDevice& device = shared_[static_cast<size_t>(device_index)];
  const int64_t op_end = loop_->now_ns() + static_cast<int64_t>(std::ceil(device.running.front().left_ns));
  loop_->Cancel(device.turn);
  device.turn = loop_->ScheduleAt(device.running.size() > 1 ? std::min(device.turn_end_ns, op_end) : op_end, &turns_,
                                  device_index, 0);
}

void ComputeStreams::GiveTurn(int device_index) {
  SharedDevice& device = shared_[static_cast<size_t>(device_index)];
  const int64_t now = loop_->now_ns();
  Running& holder = device.running.front();
  if (!holder.held) {  // its first turn: the op starts now, having waited for the device since it was ready
    holder.held = true;
    schedules::OpTiming& timing = record_->ranks[holder.rank].ops[holder.index];
    timing.end_ns += now - timing.start_ns;
    timing.start_ns = now;
  }
  device.turn_end_ns = now + time_slice_ns_;
  ScheduleStop(device_index);
}

void ComputeStreams::EndTurn(int device_index) {
  SharedDevice& device = shared_[static_cast<size_t>(device_index)];
  Progress(device);
  Running holder = device.running.front();
  device.running.erase(device.running.begin());
  if (holder.left_ns > 0.5) {
    device.running.push_back(holder);  // its turn is over: the next op waiting goes (or it again)
    GiveTurn(device_index);
    return;
  }
  record_->ranks[holder.rank].ops[holder.index].end_ns = loop_->now_ns();
  if (!device.running.empty()) GiveTurn(device_index);
  FinishOp(holder.rank, holder.index, schedule_.ops[holder.rank][holder.index]);
  Advance(holder.rank);
}

void ComputeStreams::Progress(SharedDevice& device) {
  const int64_t now = loop_->now_ns();
  if (time_slice_ns_ > 0) {  // only the holder progresses
    if (!device.running.empty()) {
      device.running.front().left_ns = std::max(0.0, device.running.front().left_ns - static_cast<double>(now - device.since_ns));
    }
  } else if (!device.running.empty()) {
    const double done = static_cast<double>(now - device.since_ns) / static_cast<double>(device.running.size());
    for (Running& r : device.running) r.left_ns = std::max(0.0, r.left_ns - done);
  }
  device.since_ns = now;
}

void ComputeStreams::Reschedule(SharedDevice& device) {
  const int64_t now = loop_->now_ns();
  const auto n = static_cast<double>(device.running.size());
  for (Running& r : device.running) {
    loop_->Cancel(r.end);
    r.end = loop_->ScheduleAt(now + std::llround(r.left_ns * n), this, r.rank, r.index);
  }
}

// Runs `rank` forward from its next op at the loop's time until it starts an op that holds the
// stream or must wait for an input.
void ComputeStreams::Advance(int rank) {
  Stream& stream = streams_[rank];
  stream.waiting = false;
  const auto& ops = schedule_.ops[rank];
  while (stream.next < ops.size()) {
    const int index = static_cast<int>(stream.next);
    const Op& op = ops[index];
    const int64_t now = loop_->now_ns();
    if (schedules::IsAllToAll(op.kind)) {  // posted here (or by its pair's start); the list waits for it
      if (!a2a_posted_[rank][index]) {
        a2a_posted_[rank][index] = true;
        stream.owed_ns += costs_.OverheadOf(rank);
        hooks_->Posted(rank, index, op);
      }
      if (!hooks_->AllToAllDone(rank, index)) {
        stream.waiting = true;
        return;
      }
      ++stream.next;
      continue;
    }
    if (!schedules::RunsOnCompute(op.kind)) {  // posted: it runs on the rank's other streams
      ++stream.next;
      stream.owed_ns += costs_.OverheadOf(rank);
      hooks_->Posted(rank, index, op);
      continue;
    }
    if (schedules::RunsOnCompute(op.kind) && !hooks_->InputReady(rank, index, op)) {
      stream.waiting = true;
      return;
    }
    ++stream.next;
    int64_t duration = OpDurationNs(costs_.stages[op.stage], op.kind, steps_in_place_[rank][index]);
    if (!correction_spans_.empty()) {  // the velocity's update at a STEP; a backward moved and back
      const StageCost& c = costs_.stages[op.stage];
      if (schedules::ProducesVersion(op.kind)) duration += c.velocity_ns;
      if (correction_spans_[rank][index] != 0) duration += c.correction_ns;
    }
    if (const int64_t measured = costs_.MeasuredOpNs(rank, index); measured >= 0) {
      duration = measured;  // a replayed run's own time for this op
    } else {
      double factor = 1;
      if (!stash_depths_.empty() && rank < static_cast<int>(costs_.rank_stash.size())) {
        factor = StashFactor(costs_.rank_stash[rank], op.kind, stash_depths_[rank][index]);
      }
      if (costs_.op_time_cv > 0) factor *= OpTimeFactor(costs_.op_time_cv, costs_.op_time_seed, rank, index);
      // An overlapped pair beside its ALL_TO_ALLs runs on what they leave of the device.
      if (PostPaired(rank, index)) factor /= 1 - costs_.a2a_sm_share;
      if (factor != 1) duration = std::llround(static_cast<double>(duration) * factor);
    }
    // The receiver's copy ends the transfer; the runtime's work owed since the last op follows.
    const int64_t in_hand =
        std::max(stream.free_ns, now) + (schedules::IsCompute(op.kind) ? hooks_->InputCopyNs(rank, op) : 0);
    const int64_t measured_overhead = costs_.MeasuredOverheadNs(rank, index);
    const int64_t start = in_hand + (measured_overhead >= 0 ? measured_overhead : stream.owed_ns);
    stream.owed_ns = 0;
    record_->ranks[rank].ops[index] = {start, start + duration};  // a shared device's end comes later
    hooks_->ComputeStarted(rank, index, op, in_hand);
    if (schedules::ProducesVersion(op.kind) && duration == 0 && start == now) {  // an instant: the stream stays free
      FinishOp(rank, index, op);
      continue;
    }
    if (shared_of_[rank] >= 0) {
      loop_->ScheduleAt(start, &joiner_, rank, index);
    } else {
      loop_->ScheduleAt(start + duration, this, rank, index);
    }
    return;
  }
}

bool ComputeStreams::PostPaired(int rank, int index) {
  if (paired_.empty() || paired_[rank].empty()) return false;
  const std::vector<Op>& ops = schedule_.ops[rank];
  // The pair's first op posts them; its partner runs beside them too.
  const int first = index > 0 && ops[index].overlapped ? index - 1 : index;
  bool any = false;
  for (size_t j = static_cast<size_t>(first) + 2; j < ops.size() && schedules::IsAllToAll(ops[j].kind); ++j) {
    if (paired_[rank][j] != first) break;
    any = true;
    if (!a2a_posted_[rank][j]) {
      a2a_posted_[rank][j] = true;
      hooks_->Posted(rank, static_cast<int>(j), ops[j]);
    }
  }
  return any;
}

void ComputeStreams::FinishOp(int rank, int index, const Op& op) {
  streams_[rank].free_ns = loop_->now_ns();
  streams_[rank].owed_ns = costs_.OverheadOf(rank);
  hooks_->ComputeFinished(rank, index, op);
}

}  // namespace stagecraft::sim
