// Strict parsers and short formatters for the unit strings of scenario files.
#include "stagecraft/scenario/units.h"

#include <fmt/format.h>

#include <array>
#include <charconv>
#include <cmath>
#include <limits>
#include <optional>
#include <utility>

#include "stagecraft/base/error.h"
#include "stagecraft/schedules/ir.h"

namespace stagecraft::sim {
namespace {

using stagecraft::InputError;

struct Unit {
  std::string_view name;
  double scale;  // multiplier to the base unit (bytes, bytes/s, ns, FLOP/s)
};

constexpr std::array<Unit, 11> kByteUnits = {{
    {"B", 1.0},
    {"KB", 1e3},
    {"MB", 1e6},
    {"GB", 1e9},
    {"TB", 1e12},
    {"PB", 1e15},
    {"KiB", 1024.0},
    {"MiB", 1024.0 * 1024},
    {"GiB", 1024.0 * 1024 * 1024},
    {"TiB", 1024.0 * 1024 * 1024 * 1024},
    {"PiB", 1024.0 * 1024 * 1024 * 1024 * 1024},
}};

constexpr std::array<Unit, 5> kDurationUnits = {{
    {"ns", 1.0},
    {"us", 1e3},
    {"\xC2\xB5s", 1e3},  // µs
    {"ms", 1e6},
    {"s", 1e9},
}};

constexpr std::array<Unit, 7> kFlopsPrefixes = {{
    {"", 1.0},
    {"K", 1e3},
    {"M", 1e6},
    {"G", 1e9},
    {"T", 1e12},
    {"P", 1e15},
    {"E", 1e18},
}};

constexpr std::array<Unit, 5> kBitPrefixes = {{
    {"", 1.0},
    {"K", 1e3},
    {"M", 1e6},
    {"G", 1e9},
    {"T", 1e12},
}};

bool IsDigit(char c) { return c >= '0' && c <= '9'; }
bool IsBlank(char c) { return c == ' ' || c == '\t'; }

std::string_view Trim(std::string_view text) {
  while (!text.empty() && IsBlank(text.front())) text.remove_prefix(1);
  while (!text.empty() && IsBlank(text.back())) text.remove_suffix(1);
  return text;
}

// A number split from its unit: "1.5GiB" -> value 1.5, unit "GiB".
struct Quantity {
  double value = 0;
  std::optional<uint64_t> integer;  // set when the number had no '.' or exponent
  std::string_view unit;
};

[[noreturn]] void Fail(std::string_view expected, std::string_view text, std::string_view why = {}) {
  if (why.empty()) throw InputError(fmt::format("expected {}, got '{}'", expected, text));
  throw InputError(fmt::format("expected {}, got '{}' ({})", expected, text, why));
}

// Splits `text` into a non-negative decimal number and the unit after it.
Quantity SplitNumber(std::string_view text, std::string_view expected) {
  const std::string_view trimmed = Trim(text);
  if (trimmed.empty()) Fail(expected, text, "empty");
  if (trimmed.front() == '-') Fail(expected, text, "negative");
  size_t n = 0;
  size_t digits = 0;
  bool is_integer = true;
  while (n < trimmed.size() && IsDigit(trimmed[n])) ++n, ++digits;
  if (n < trimmed.size() && trimmed[n] == '.') {
    is_integer = false;
    ++n;
    while (n < trimmed.size() && IsDigit(trimmed[n])) ++n, ++digits;
  }
  if (digits == 0) Fail(expected, text);
  // An exponent only when digits follow, so a unit starting with 'e' would still parse.
  if (n < trimmed.size() && (trimmed[n] == 'e' || trimmed[n] == 'E')) {
    size_t k = n + 1;
    if (k < trimmed.size() && (trimmed[k] == '+' || trimmed[k] == '-')) ++k;
    if (k < trimmed.size() && IsDigit(trimmed[k])) {
      while (k < trimmed.size() && IsDigit(trimmed[k])) ++k;
      n = k;
      is_integer = false;
    }
  }
  Quantity q;
  const char* begin = trimmed.data();
  const auto [end, ec] = std::from_chars(begin, begin + n, q.value);
  if (ec == std::errc::result_out_of_range || !std::isfinite(q.value)) Fail(expected, text, "too large");
  if (ec != std::errc() || end != begin + n) Fail(expected, text);
  if (is_integer) {
    uint64_t integer = 0;
    const auto [iend, iec] = std::from_chars(begin, begin + n, integer);
    if (iec == std::errc() && iend == begin + n) q.integer = integer;
  }
  q.unit = Trim(trimmed.substr(n));
  return q;
}

template <size_t N>
std::optional<double> FindScale(const std::array<Unit, N>& units, std::string_view name) {
  for (const Unit& unit : units) {
    if (unit.name == name) return unit.scale;
  }
  return std::nullopt;
}

bool EqualsIgnoreCase(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    const auto lower = [](char c) { return c >= 'A' && c <= 'Z' ? static_cast<char>(c - 'A' + 'a') : c; };
    if (lower(a[i]) != lower(b[i])) return false;
  }
  return true;
}

bool EndsWith(std::string_view text, std::string_view suffix) {
  return text.size() >= suffix.size() && text.substr(text.size() - suffix.size()) == suffix;
}

// value * scale as an int64, exact for integer inputs, rounded to nearest otherwise.
int64_t ToInt64(const Quantity& q, double scale, std::string_view expected, std::string_view text) {
  constexpr auto kMax = std::numeric_limits<int64_t>::max();
  const double integral_scale = std::round(scale);
  if (q.integer && integral_scale == scale) {
    const auto s = static_cast<uint64_t>(integral_scale);
    if (*q.integer > static_cast<uint64_t>(kMax) / s) Fail(expected, text, "too large");
    return static_cast<int64_t>(*q.integer * s);
  }
  const double value = q.value * scale;
  // 2^63 is exactly representable; anything at or above it does not fit.
  if (!std::isfinite(value) || value >= 9223372036854775808.0) Fail(expected, text, "too large");
  return std::llround(value);
}

double ToDouble(const Quantity& q, double scale, std::string_view expected, std::string_view text) {
  const double value = q.value * scale;
  if (!std::isfinite(value)) Fail(expected, text, "too large");
  return value;
}

}  // namespace


double ParseBandwidth(std::string_view text) {
  constexpr std::string_view kExpected = "a bandwidth like 50GB/s or 400Gbps";
  const Quantity q = SplitNumber(text, kExpected);
  std::string_view unit = q.unit;
  if (unit.empty() && q.value == 0) return 0;  // 0 needs no unit (the caller checks its range)
  // Bytes per second: "<size unit>/s" or "<size unit>ps" with a capital B.
  for (std::string_view per : {"/s", "ps"}) {
    if (!EndsWith(unit, per)) continue;
    const std::string_view size = unit.substr(0, unit.size() - per.size());
    if (!size.empty() && size.back() == 'B') {
      if (const auto scale = FindScale(kByteUnits, size)) return ToDouble(q, *scale, kExpected, text);
    }
    if (!size.empty() && size.back() == 'b') {
      if (const auto scale = FindScale(kBitPrefixes, size.substr(0, size.size() - 1))) {
        return ToDouble(q, *scale / 8.0, kExpected, text);
      }
    }
  }
  Fail(kExpected, text, unit.empty() ? "missing unit" : "units: B/s..TB/s, KiB/s..TiB/s, bps..Tbps");
}

namespace {

constexpr std::string_view kExpectedBytes = "a size like 80GiB";
constexpr std::string_view kExpectedDuration = "a duration like 2us or 1.5ms";

// The number and its scale to bytes.
std::pair<Quantity, double> SplitBytes(std::string_view text) {
  const Quantity q = SplitNumber(text, kExpectedBytes);
  if (q.unit.empty()) return {q, 1.0};
  const auto scale = FindScale(kByteUnits, q.unit);
  if (!scale) Fail(kExpectedBytes, text, "units: B, KB, MB, GB, TB, PB, KiB, MiB, GiB, TiB, PiB");
  return {q, *scale};
}

// The number and its scale to nanoseconds.
std::pair<Quantity, double> SplitDuration(std::string_view text) {
  const Quantity q = SplitNumber(text, kExpectedDuration);
  if (q.unit.empty()) {
    if (q.value == 0) return {q, 1.0};
    Fail(kExpectedDuration, text, "missing unit: ns, us, ms or s");
  }
  const auto scale = FindScale(kDurationUnits, q.unit);
  if (!scale) Fail(kExpectedDuration, text, "units: ns, us, ms, s");
  return {q, *scale};
}

}  // namespace

int64_t ParseBytes(std::string_view text) {
  const auto [q, scale] = SplitBytes(text);
  return ToInt64(q, scale, kExpectedBytes, text);
}

int64_t ParseDurationNs(std::string_view text) {
  const auto [q, scale] = SplitDuration(text);
  return ToInt64(q, scale, kExpectedDuration, text);
}

double ParseDurationNsAsDouble(std::string_view text) {
  const auto [q, scale] = SplitDuration(text);
  return ToDouble(q, scale, kExpectedDuration, text);
}

double ParseBytesAsDouble(std::string_view text) {
  const auto [q, scale] = SplitBytes(text);
  return ToDouble(q, scale, kExpectedBytes, text);
}

double ParseFlops(std::string_view text) {
  constexpr std::string_view kExpected = "a compute rate like 989TFLOPS";
  const Quantity q = SplitNumber(text, kExpected);
  const std::string_view unit = q.unit;
  if (unit.empty() && q.value == 0) return 0;  // 0 needs no unit (the caller checks its range)
  for (std::string_view suffix : {"FLOPS", "FLOP/s"}) {
    if (unit.size() < suffix.size()) continue;
    const size_t cut = unit.size() - suffix.size();
    if (!EqualsIgnoreCase(unit.substr(cut), suffix)) continue;
    if (const auto scale = FindScale(kFlopsPrefixes, unit.substr(0, cut))) return ToDouble(q, *scale, kExpected, text);
  }
  Fail(kExpected, text, unit.empty() ? "missing unit" : "units: FLOPS, KFLOPS .. EFLOPS");
}

}  // namespace stagecraft::sim
