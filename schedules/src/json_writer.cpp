// The text buffer under RapidJSON's writer, strings repaired to well-formed UTF-8, and numbers
// in shortest round-trip form.
#include "json_writer.h"

#include <algorithm>
#include <charconv>
#include <cmath>

#include <fmt/format.h>

#include "utf8.h"

namespace stagecraft::schedules {

std::string JsonTextStream::Take() {
  buffer_.resize(static_cast<size_t>(at_ - buffer_.data()));
  std::string text = std::move(buffer_);
  buffer_.clear();
  at_ = buffer_.data();
  return text;
}

void JsonTextStream::Grow(size_t n) {
  const size_t used = static_cast<size_t>(at_ - buffer_.data());
  buffer_.resize(std::max(2 * buffer_.size(), used + n));
  at_ = buffer_.data() + used;
}

std::string ShortestNumberText(double value) {
  if (!std::isfinite(value)) return "null";
  std::string text = std::signbit(value) ? "-" : "";
  if (value == 0) return text + "0.0";
  // "d.ddde+XX": the digits without the point, and the exponent of the first one.
  char buffer[32];
  const char* const sci = buffer;
  const char* const end =
      std::to_chars(buffer, buffer + sizeof buffer, std::fabs(value), std::chars_format::scientific).ptr;
  const char* const e = std::find(sci, end, 'e');
  std::string digits(sci, 1);
  if (e - sci > 2) digits.append(sci + 2, e);
  int exponent = 0;
  std::from_chars(e + (e[1] == '+' ? 2 : 1), end, exponent);
  const int k = static_cast<int>(digits.size());
  const int point = exponent + 1;  // digits before the decimal point
  if (k <= point && point <= 15) return text + digits + std::string(point - k, '0') + ".0";
  if (0 < point && point <= 15) return text + digits.substr(0, point) + "." + digits.substr(point);
  if (-4 < point && point <= 0) return text + "0." + std::string(-point, '0') + digits;
  text += digits.front();
  if (k > 1) text += "." + digits.substr(1);
  return text + fmt::format("e{}{:02}", exponent < 0 ? '-' : '+', std::abs(exponent));
}

void WriteString(JsonWriter& writer, std::string_view text) {
  const char* p = text.data();
  const char* end = p + text.size();
  for (int n = 0; p < end;) {
    if (static_cast<unsigned char>(*p) < 0x80) {
      ++p;
    } else if ((n = Utf8Sequence(p, end)) > 0) {
      p += n;
    } else {
      break;
    }
  }
  if (p == end) {
    writer.String(text.data(), static_cast<rapidjson::SizeType>(text.size()));
    return;
  }
  std::string repaired(text.data(), p);
  while (p < end) {
    const int n = Utf8Sequence(p, end);
    if (n > 0) {
      repaired.append(p, static_cast<size_t>(n));
    } else {
      repaired += "\xEF\xBF\xBD";  // U+FFFD REPLACEMENT CHARACTER
    }
    p += n > 0 ? n : -n;
  }
  writer.String(repaired.data(), static_cast<rapidjson::SizeType>(repaired.size()));
}

}  // namespace stagecraft::schedules
