// The text buffer under RapidJSON's writer, and strings repaired to well-formed UTF-8.
#include "json_writer.h"

#include <algorithm>

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
