// The statistics every part reports the same way (profile, calibration, compare, the viewer):
// the median, the spread of a series, and the relative error of a prediction.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

namespace stagecraft {

// The middle value of `values`, the mean of the two middle ones for an even count (rounded
// toward zero for integers); 0 when there are none. A few outliers on either side do not move it.
double Median(std::vector<double> values);
int64_t Median(std::vector<int64_t> values);

// How much a series moved: its median, min, max and (max − min) / median in percent (0 when the
// median is 0). All 0 for no values.
struct SeriesSpread {
  double median = 0, min = 0, max = 0, spread_pct = 0;
};
SeriesSpread SpreadOf(std::vector<double> values);

// The signed relative error of a prediction in percent, (predicted − measured) / measured × 100;
// 0 when both are 0, none when only the measured value is.
std::optional<double> RelativeErrorPct(double predicted, double measured);

// The error of a predicted fraction (a bubble) in percentage points: (predicted − measured) × 100.
inline double ErrorPp(double predicted_fraction, double measured_fraction) {
  return 100 * (predicted_fraction - measured_fraction);
}

}  // namespace stagecraft
