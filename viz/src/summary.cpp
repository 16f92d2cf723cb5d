// The summary panel's numbers, read leniently from the trace's summary object (DESIGN.md §4
// names): a field that is missing or of the wrong type keeps its default, nothing throws.
#include "stagecraft/viz/summary.h"

#include <cmath>
#include <limits>

#include <nlohmann/json.hpp>

namespace stagecraft::viz {
namespace {

using Json = nlohmann::json;

// Sets *out from object[key] when that is a number; true when it did.
bool ReadNumber(const Json& object, const char* key, double* out) {
  const auto it = object.find(key);
  if (it == object.end() || !it->is_number()) return false;
  *out = it->get<double>();
  return true;
}

// Byte counts: integers, or whole finite numbers that fit (a writer may print 1e9).
bool ReadBytes(const Json& object, const char* key, int64_t* out) {
  const auto it = object.find(key);
  if (it == object.end()) return false;
  if (it->is_number_unsigned()) {
    if (it->get<uint64_t>() > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) return false;
    *out = static_cast<int64_t>(it->get<uint64_t>());
    return true;
  }
  if (it->is_number_integer()) {
    *out = it->get<int64_t>();
    return true;
  }
  if (!it->is_number_float()) return false;
  const double v = it->get<double>();
  if (!std::isfinite(v) || v != std::floor(v) || std::fabs(v) >= 9.2e18) return false;
  *out = static_cast<int64_t>(v);
  return true;
}

// per_rank[r]: a rank entry in order; an entry that is not an object keeps the defaults.
std::vector<RankSummary> ReadRanks(const Json& summary) {
  std::vector<RankSummary> ranks;
  const auto it = summary.find("per_rank");
  if (it == summary.end() || !it->is_array()) return ranks;
  for (const Json& entry : *it) {
    RankSummary r;
    if (entry.is_object()) {
      ReadNumber(entry, "busy_ms", &r.busy_ms);
      ReadBytes(entry, "peak_memory_bytes", &r.peak_memory_bytes);
    }
    ranks.push_back(r);
  }
  return ranks;
}

// One mean loss per step; a list with anything but numbers is not used at all (its indices
// would no longer be steps).
std::vector<double> ReadLosses(const Json& summary) {
  std::vector<double> losses;
  const auto it = summary.find("losses");
  if (it == summary.end() || !it->is_array()) return losses;
  for (const Json& v : *it) {
    if (!v.is_number()) return {};
    losses.push_back(v.get<double>());
  }
  return losses;
}

}  // namespace

Summary ReadSummary(const LoadedTrace& trace) {
  Summary s;
  const Json summary = Json::parse(trace.trace.summary_json, nullptr, /*allow_exceptions=*/false);
  if (!summary.is_object()) return s;
  bool any = ReadNumber(summary, "step_time_ms", &s.step_time_ms);
  any |= ReadNumber(summary, "throughput_samples_per_s", &s.throughput_samples_per_s);
  any |= ReadNumber(summary, "bubble_fraction", &s.bubble_fraction);
  s.ranks = ReadRanks(summary);
  s.losses = ReadLosses(summary);
  s.present = any || !s.ranks.empty() || !s.losses.empty();
  return s;
}

}  // namespace stagecraft::viz
