// Short human formats of sizes and durations (see format.h).
#include "stagecraft/base/format.h"

#include <array>
#include <cmath>
#include <string_view>

#include <fmt/format.h>

namespace stagecraft {

std::string FormatBytes(int64_t bytes) {
  constexpr std::array<std::string_view, 6> kNames = {"KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
  const std::string sign = bytes < 0 ? "-" : "";
  // Magnitude as a double; exact enough for two decimals, and safe for INT64_MIN.
  double value = std::fabs(static_cast<double>(bytes));
  if (value < 1024) return fmt::format("{}{} B", sign, static_cast<int64_t>(value));
  size_t unit = 0;
  value /= 1024;
  while (value >= 1024 && unit + 1 < kNames.size()) {
    value /= 1024;
    ++unit;
  }
  return fmt::format("{}{:.2f} {}", sign, value, kNames[unit]);
}

std::string FormatDuration(int64_t ns) {
  const std::string sign = ns < 0 ? "-" : "";
  const double value = std::fabs(static_cast<double>(ns));
  if (value < 1000) return fmt::format("{}{} ns", sign, static_cast<int64_t>(value));
  double scaled = value / 1e3;
  std::string_view unit = "us";
  if (value >= 1e9) {
    scaled = value / 1e9;
    unit = "s";
  } else if (value >= 1e6) {
    scaled = value / 1e6;
    unit = "ms";
  }
  // Three significant digits; a value that rounds up to 1000 keeps its unit ("1000 ms").
  const int decimals = scaled < 9.995 ? 2 : (scaled < 99.95 ? 1 : 0);
  return fmt::format("{}{:.{}f} {}", sign, scaled, decimals, unit);
}

}  // namespace stagecraft
