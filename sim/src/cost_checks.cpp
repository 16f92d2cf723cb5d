// Checked conversions of derived costs (see cost_checks.h).
#include "cost_checks.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "stagecraft/base/error.h"
#include "stagecraft/scenario/limits.h"

namespace stagecraft::sim::detail {
namespace {

std::string Prefix(std::string_view path) { return path.empty() ? "" : fmt::format("{}: ", path); }

}  // namespace

std::string SecondsAbove(double ns, double limit_ns) {
  std::string text;
  for (int digits = 2; digits <= 15; ++digits) {
    text = fmt::format("{:.{}g}", ns / 1e9, digits);
    if (text != fmt::format("{:.{}g}", limit_ns / 1e9, digits)) break;
  }
  return text;
}

std::string Count(int64_t n, std::string_view noun) { return fmt::format("{} {}{}", n, noun, n == 1 ? "" : "s"); }

int64_t CheckedOpNs(double ns, std::string_view path, Derived derived, const KeysOf& keys) {
  if (!(ns <= static_cast<double>(kMaxOpNs))) {  // also NaN
    throw InputError(fmt::format("{}{} of stage {} would take {} s ({}), above the limit of 1 h per op", Prefix(path),
                                 derived.what, derived.stage, SecondsAbove(ns, static_cast<double>(kMaxOpNs)),
                                 keys(derived.stage)));
  }
  return std::llround(std::max(ns, 0.0));
}

int64_t CheckedBytes(double bytes, std::string_view path, Derived derived, const KeysOf& keys) {
  if (!(bytes <= static_cast<double>(kMaxValueBytes))) {
    throw InputError(fmt::format("{}{} of stage {} would need {:.2g} bytes ({}), above the limit of 1 PiB per value",
                                 Prefix(path), derived.what, derived.stage, bytes, keys(derived.stage)));
  }
  return std::llround(std::max(bytes, 0.0));
}

void CheckComposedOps(const CostTable& table, std::string_view path, const KeysOf& keys) {
  for (size_t st = 0; st < table.stages.size(); ++st) {
    const StageCost& c = table.stages[st];
    const int stage = static_cast<int>(st);
    // Each field is within kMaxOpNs already, so these sums cannot overflow.
    CheckedOpNs(static_cast<double>(c.FullBackwardNs()), path, {"a backward", stage}, keys);
    CheckedOpNs(static_cast<double>(c.step_ns + c.version_copy_ns), path, {"an optimizer step", stage}, keys);
  }
}

}  // namespace stagecraft::sim::detail
