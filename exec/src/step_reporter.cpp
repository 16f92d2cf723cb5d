// The last stage's per-step report (step_reporter.h).
#include "stagecraft/exec/step_reporter.h"

#include <cmath>
#include <stdexcept>

#include <fmt/format.h>

namespace stagecraft::exec {

std::vector<int> StepEnds(const std::vector<schedules::Op>& ops, int steps, int last_stage) {
  std::vector<int> ends(static_cast<size_t>(steps), -1);
  for (int i = 0; i < static_cast<int>(ops.size()); ++i) {
    if (schedules::ProducesVersion(ops[i].kind) && ops[i].stage == last_stage) ends[ops[i].step] = i;
  }
  return ends;
}

StepReporter::StepReporter(const schedules::Schedule& schedule, int rank, Device& device, float loss_scale,
                           const RunHooks::StepFn& on_step, bool scratch_row)
    : steps_(schedule.steps),
      microbatches_(schedule.microbatches),
      device_(device),
      loss_scale_(loss_scale),
      on_step_(on_step),
      step_ends_(StepEnds(schedule.ops[rank], schedule.steps, schedule.stages() - 1)) {
  if (schedule.shape.RankOf(schedule.stages() - 1) != rank) return;
  losses_ = Buffer(device_, static_cast<int64_t>(steps_ + (scratch_row ? 1 : 0)) * microbatches_);
  loss_sum_.assign(static_cast<size_t>(steps_), 0.0);
  host_ = Buffer(device_, microbatches_, MemoryTier::kHost);
}

void StepReporter::Report(const schedules::RankRecord& record) {
  if (!active()) return;
  for (; reported_ < steps_; ++reported_) {
    const int t = reported_;
    const int end_op = step_ends_.at(t);
    if (end_op < 0 || record.ops[end_op].end_ns < 0) return;  // not run yet
    // The step's end was reached on the device (its time is in the record), so its losses are
    // written: read on the to-host copy stream, whose wait holds the host for this copy and the
    // copies queued there before it (a host-staged send's, an offload's), not for the compute
    // queued since (a replayed step runs meanwhile).
    device_.memory().CopyAsync(host_.data(), MemoryTier::kHost,
                               losses_.data() + static_cast<int64_t>(t) * microbatches_, MemoryTier::kDevice,
                               microbatches_, StreamKind::kToHost);
    device_.streams().Synchronize(StreamKind::kToHost);
    const float* host = host_.data();
    for (int mb = 0; mb < microbatches_; ++mb) {
      if (!std::isfinite(host[mb])) {
        throw std::runtime_error(fmt::format(
            "step {} microbatch {}: loss is {}; training diverged (lower training.lr{})", t, mb, host[mb],
            loss_scale_ > 1.0f
                ? fmt::format(", or training.loss_scale: gradients scaled by {} may have overflowed", loss_scale_)
                : ""));
      }
      loss_sum_[t] += host[mb];
    }
    if (on_step_) on_step_({t, steps_, loss_sum_[t] / microbatches_, record.ops[end_op].end_ns});
  }
}

std::vector<double> StepReporter::MeanLosses() const {
  std::vector<double> means;
  for (const double sum : loss_sum_) means.push_back(sum / microbatches_);
  return means;
}

}  // namespace stagecraft::exec
