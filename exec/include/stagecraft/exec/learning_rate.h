// The learning rate of each optimizer update (DESIGN.md §10): training.lr_schedule's warm-up and
// decay, which every schedule uses, and PipeMare's per-stage rescheduling (Yang et al., MLSys'21
// §3.1), which divides a stale stage's rate by its delay at first. Both backends' STEPs take
// their rate from here (weight_store.h).
#pragma once

#include <cstdint>

#include "stagecraft/scenario/scenario.h"

namespace stagecraft::exec {

// Where an update falls in the run: update `update` (0-based, schedules::UpdateIndex) of a run
// of `steps` training steps with `per_step` updates each (one, or one per microbatch).
struct UpdatePlace {
  int64_t update = 0;
  int64_t per_step = 1;
  int64_t steps = 1;
};

// The schedule's rate, lr times:
//   warm-up (warmup_steps W > 0): (k + 1) / (W · per_step) while k < W · per_step;
//   then with decay linear or cosine, progress p = (k − W·per_step) / (steps·per_step − W·per_step)
//   from 0 to 1, the rate falls from lr towards min_lr: min_lr + (lr − min_lr)(1 − p), or
//   min_lr + (lr − min_lr) · (1 + cos(π p)) / 2 (Megatron-LM's lr_decay_style).
double ScheduledRate(double lr, const sim::LrScheduleSpec& schedule, const UpdatePlace& at);

// PipeMare's rescheduling: the rate of a stage whose forward reads weights `delay` updates old,
// rate / τ^(1 − min(k / K, 1)) with τ = max(delay, 1) and k the training steps done
// (update / per_step), K = `reschedule_steps`; the rate itself when K is 0.
double RescheduledRate(double rate, int delay, int64_t reschedule_steps, const UpdatePlace& at);

}  // namespace stagecraft::exec
