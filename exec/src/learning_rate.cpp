// Learning rates per update (see learning_rate.h).
#include "stagecraft/exec/learning_rate.h"

#include <algorithm>
#include <cmath>
#include <numbers>

namespace stagecraft::exec {

double ScheduledRate(double lr, const sim::LrScheduleSpec& schedule, const UpdatePlace& at) {
  const int64_t per_step = std::max<int64_t>(at.per_step, 1);
  const int64_t warmup = std::max<int64_t>(schedule.warmup_steps, 0) * per_step;
  const int64_t total = std::max<int64_t>(at.steps, 1) * per_step;
  if (at.update < warmup) return lr * static_cast<double>(at.update + 1) / static_cast<double>(warmup);
  if (schedule.decay == sim::LrDecay::kNone || total <= warmup) return lr;
  const double p = std::min(1.0, static_cast<double>(at.update - warmup) / static_cast<double>(total - warmup));
  const double span = lr - schedule.min_lr;
  if (schedule.decay == sim::LrDecay::kLinear) return schedule.min_lr + span * (1.0 - p);
  return schedule.min_lr + span * 0.5 * (1.0 + std::cos(std::numbers::pi * p));
}

double RescheduledRate(double rate, int delay, int64_t reschedule_steps, const UpdatePlace& at) {
  if (reschedule_steps <= 0 || delay <= 1) return rate;
  const double k = static_cast<double>(at.update) / static_cast<double>(std::max<int64_t>(at.per_step, 1));
  const double exponent = 1.0 - std::min(k / static_cast<double>(reschedule_steps), 1.0);
  return rate / std::pow(static_cast<double>(delay), exponent);
}

}  // namespace stagecraft::exec
