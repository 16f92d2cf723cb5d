// The per-step report of the last stage's rank: each microbatch's loss, read back once its step
// is over (at the last stage's last STEP of the step), summed per step, a non-finite one ending
// the run, and RunHooks::on_step called as each step ends. Other ranks hold and report nothing.
#pragma once

#include <cstdint>
#include <vector>

#include "stagecraft/exec/device.h"
#include "stagecraft/exec/runtime.h"
#include "stagecraft/schedules/ir.h"
#include "stagecraft/schedules/run_record.h"

namespace stagecraft::exec {

// For each of `steps` steps, the index in `ops` of stage `last_stage`'s last STEP of that step;
// -1 where `ops` has none (a rank that does not hold that stage).
std::vector<int> StepEnds(const std::vector<schedules::Op>& ops, int steps, int last_stage);

class StepReporter {
 public:
  // On the rank of `schedule`'s last stage: the losses of every microbatch of the run
  // ([steps x microbatches] floats of `device`). `loss_scale` (TrainingConfig) is named in the
  // message of a diverged run; `on_step` (copied) may be empty.
  // With `scratch_row`, one more row of losses where a replayed step's forwards write
  // (ScratchLossOf), copied into the step's own row by CommitScratch.
  StepReporter(const schedules::Schedule& schedule, int rank, Device& device, float loss_scale,
               const RunHooks::StepFn& on_step, bool scratch_row = false);

  // Whether this rank holds the last stage (and so the losses).
  bool active() const { return !losses_.empty(); }
  // Where the last stage's F of `op` writes its microbatch's mean loss (LossOps::forward).
  float* LossOf(const schedules::Op& op) {
    return losses_.data() + static_cast<int64_t>(op.step) * microbatches_ + op.microbatch;
  }
  // The same microbatch's slot in the scratch row (a step graph writes there every step).
  float* ScratchLossOf(const schedules::Op& op) {
    return losses_.data() + static_cast<int64_t>(steps_) * microbatches_ + op.microbatch;
  }
  // Queues the copy of the scratch row into step `step`'s row, after the work queued so far (not
  // inside a capture), and orders the read-back stream after it: the step's end, which Report
  // waits for, may come before its last pass (the last stage's STEP before another chunk's B).
  void CommitScratch(int step) {
    if (!active()) return;
    device_.memory().Copy(losses_.data() + static_cast<int64_t>(step) * microbatches_,
                          losses_.data() + static_cast<int64_t>(steps_) * microbatches_, microbatches_);
    device_.streams().OrderAfter(StreamKind::kToHost, StreamKind::kCompute);
  }
  const std::vector<int>& step_ends() const { return step_ends_; }
  int64_t bytes() const { return losses_.size() * static_cast<int64_t>(sizeof(float)); }
  int reported() const { return reported_; }

  // Reports, in step order, each step not reported yet whose end op (step_ends) has its end time
  // in `record`: reads the step's losses back, throws std::runtime_error naming the step and
  // the microbatch when one is not finite, and calls on_step with the mean.
  void Report(const schedules::RankRecord& record);
  // The mean loss of each step (reported or not: a run's last Report has reported them all);
  // empty on a rank that is not active.
  std::vector<double> MeanLosses() const;

 private:
  const int steps_;
  const int microbatches_;
  Device& device_;
  const float loss_scale_;
  const RunHooks::StepFn on_step_;
  const std::vector<int> step_ends_;
  Buffer losses_;                // [steps (+ 1 scratch) x microbatches], on the last stage's rank only
  std::vector<double> loss_sum_;  // per step
  Buffer host_;                   // one step's losses read back, in the host tier
  int reported_ = 0;
};

}  // namespace stagecraft::exec
