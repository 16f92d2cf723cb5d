// Training loss against wall time, one line per schedule, as a PNG (`execute --plot`, DESIGN.md
// §10): each schedule's mean loss of a step at the step's end (its step times summed from the
// run's start), and the target loss (training.target_loss) across as a grey line when stated.
#pragma once

#include <string>
#include <vector>

#include "stagecraft/schedules/metrics.h"

namespace stagecraft::harness {

// The PNG of `runs` (executed schedules: ScheduleMetrics::executor set); throws InputError when
// no run has a loss to draw or the build has no PNG writer.
std::string LossPng(const std::vector<schedules::ScheduleMetrics>& runs, int width = 960, int height = 600);

}  // namespace stagecraft::harness
