// The training block against the rest of the scenario (validate_detail.h).
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>

#include "validate_detail.h"

namespace stagecraft::sim::detail {

void CheckTraining(const Scenario& s, Problems* out) {
  if (!s.has_training) return;
  const TrainingSpec& t = s.training;
  if (t.lr_schedule.decay != LrDecay::kNone && t.lr_schedule.min_lr > t.lr) {
    out->Add("training.lr_schedule.min_lr", fmt::format("{:g} is above training.lr {:g}: a decay ends below the rate "
                                                        "it starts from",
                                                        t.lr_schedule.min_lr, t.lr));
  }
  if (t.target_loss && !s.model.mlp && !s.model.transformer) {
    out->Add("training.target_loss", "a target loss needs a run that trains a network (model.mlp or "
                                     "model.transformer); this scenario's model is simulated only and has no loss");
  }
}

}  // namespace stagecraft::sim::detail

namespace stagecraft::sim {

void CheckPipeMareRuns(const Scenario& s) {
  const PipelineSpec& p = s.pipeline;
  if (!s.has_training || !s.training.pipemare || p.runs_all()) return;
  if (std::find(p.schedules.begin(), p.schedules.end(), "pipemare") != p.schedules.end()) return;
  // PipeMare's techniques act on the weights of an asynchronous pipeline without a stash; a
  // synchronous schedule reads the weights its forward read and has no delay to correct.
  throw InputError(fmt::format("{}{}training.pipemare: rescheduling and correction act on schedule pipemare, which "
                               "pipeline.schedule does not run ({}); add pipemare or leave the block out",
                               s.path, s.path.empty() ? "" : ": ", fmt::join(p.schedules, ", ")));
}

}  // namespace stagecraft::sim
