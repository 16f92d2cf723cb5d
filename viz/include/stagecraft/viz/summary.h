// The per-schedule numbers a trace carries in its summary (DESIGN.md §4 fields, as written by
// simulate and execute), read for the summary panel.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "stagecraft/viz/trace_set.h"

namespace stagecraft::viz {

struct RankSummary {
  double busy_ms = 0;
  int64_t peak_memory_bytes = 0;
};

struct Summary {
  bool present = false;  // false when the trace has no usable summary
  double step_time_ms = 0;
  double throughput_samples_per_s = 0;
  double bubble_fraction = 0;
  std::vector<RankSummary> ranks;
  std::vector<double> losses;  // measured traces only
};

// Missing or ill-typed fields leave their defaults (a viewer never refuses a trace for them).
Summary ReadSummary(const LoadedTrace& trace);

}  // namespace stagecraft::viz
