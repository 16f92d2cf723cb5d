// The training block against the rest of the scenario (validate_detail.h).
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>

#include "validate_detail.h"

namespace stagecraft::sim::detail {

void CheckTraining(const Scenario& s, Problems* out) {
  if (!s.has_training) return;
  const TrainingSpec& t = s.training;
  const PipelineSpec& p = s.pipeline;
  if (t.lr_schedule.decay != LrDecay::kNone && t.lr_schedule.min_lr > t.lr) {
    out->Add("training.lr_schedule.min_lr", fmt::format("{:g} is above training.lr {:g}: a decay ends below the rate "
                                                        "it starts from",
                                                        t.lr_schedule.min_lr, t.lr));
  }
  // PipeMare's techniques act on the weights of an asynchronous pipeline without a stash; a
  // synchronous schedule reads the weights its forward read and has no delay to correct.
  const bool pipemare = p.runs_all() || std::find(p.schedules.begin(), p.schedules.end(), "pipemare") != p.schedules.end();
  if (t.pipemare && !pipemare) {
    out->Add("training.pipemare", fmt::format("rescheduling and correction act on schedule pipemare, which "
                                              "pipeline.schedule does not run ({}); add pipemare or leave the block out",
                                              fmt::join(p.schedules, ", ")));
  }
  if (t.target_loss && !s.model.mlp && !s.model.transformer) {
    out->Add("training.target_loss", "a target loss needs a run that trains a network (model.mlp or "
                                     "model.transformer); this scenario's model is simulated only and has no loss");
  }
}

}  // namespace stagecraft::sim::detail
