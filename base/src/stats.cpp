// Median, spread and relative error (see stats.h).
#include "stagecraft/base/stats.h"

#include <algorithm>

namespace stagecraft {
namespace {

template <typename T>
T MiddleOf(std::vector<T>& v) {
  const size_t n = v.size();
  std::nth_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(n / 2), v.end());
  const T upper = v[n / 2];
  if (n % 2 == 1) return upper;
  const T lower = *std::max_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(n / 2));
  return lower + (upper - lower) / 2;  // without the overflow of (lower + upper) / 2
}

}  // namespace

double Median(std::vector<double> values) { return values.empty() ? 0.0 : MiddleOf(values); }

int64_t Median(std::vector<int64_t> values) { return values.empty() ? 0 : MiddleOf(values); }

SeriesSpread SpreadOf(std::vector<double> values) {
  SeriesSpread s;
  if (values.empty()) return s;
  const auto [lo, hi] = std::minmax_element(values.begin(), values.end());
  s.min = *lo;
  s.max = *hi;
  s.median = Median(std::move(values));
  s.spread_pct = s.median > 0 ? 100 * (s.max - s.min) / s.median : 0;
  return s;
}

std::optional<double> RelativeErrorPct(double predicted, double measured) {
  if (measured == 0) return predicted == 0 ? std::optional<double>(0.0) : std::nullopt;
  return 100.0 * (predicted - measured) / measured;
}

}  // namespace stagecraft
