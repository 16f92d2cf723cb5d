// The size check of a schedule read from a file, before any pass indexes its units densely.
#include "stagecraft/schedules/unit_index.h"

#include <fmt/format.h>

namespace stagecraft::schedules {

std::string CheckUnitSpace(std::string_view source, int64_t stages, int64_t microbatches, int64_t steps,
                           int64_t forwards) {
  // Saturating at kMaxUnits + 1: three factors near 2^31 would overflow an int64.
  int64_t units = stages;
  for (const int64_t factor : {microbatches, steps}) {
    units = units > kMaxUnits / factor ? kMaxUnits + 1 : units * factor;
  }
  if (units > kMaxUnits) {
    return fmt::format("{}: schedule too large ({} stages x {} microbatches x {} steps)", source, stages, microbatches,
                       steps);
  }
  if (units - forwards > kMaxUnitsWithoutForward) {
    return fmt::format("{}: {} stages x {} microbatches x {} steps need {} forward actions, one each, but there are {}",
                       source, stages, microbatches, steps, units, forwards);
  }
  return {};
}

}  // namespace stagecraft::schedules
