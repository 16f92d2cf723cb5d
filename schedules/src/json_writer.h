// The JSON writer of every file here: RapidJSON's compact Writer (every token, every string
// escaped) on a text buffer that can start a new line before the next token (one trace event per
// line); numbers whose text a format fixes (fixed decimals, exact microseconds) go in raw.
#pragma once

#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <string>
#include <string_view>

#include "json_rapidjson.h"

namespace stagecraft::schedules {

// A RapidJSON output stream that appends to a string. BreakLine() makes the next token start a
// new line: the '\n' goes after the ',' that separates it from the previous one, or before it
// when none does, so the layout is whitespace between the writer's tokens and nothing else.
// The writer puts commas and brackets with Put() and writes strings and numbers after a
// Reserve(), so those two places see every token's first character.
class JsonTextStream {
 public:
  using Ch = char;

  explicit JsonTextStream(size_t reserve_bytes = 256) {
    buffer_.resize(reserve_bytes);
    at_ = buffer_.data();
  }

  // `indent` spaces start the new line.
  void BreakLine(int indent = 0) {
    break_pending_ = true;
    indent_ = indent;
  }

  void Put(char c) {
    Room(2 + static_cast<size_t>(indent_));
    if (break_pending_) [[unlikely]] {
      if (c == ',') {
        *at_++ = ',';
        NewLine();
        return;
      }
      NewLine();
    }
    *at_++ = c;
  }
  // Room for `n` more characters, then written with PutUnsafe; they start a string or number
  // token (never a comma), so a pending line break goes first.
  void Reserve(size_t n) {
    Room(n + 1 + static_cast<size_t>(indent_));
    if (break_pending_) [[unlikely]] NewLine();
  }
  void PutUnsafe(char c) { *at_++ = c; }
  // Copies [p, end) up to the first character JSON must escape ('"', '\\', below 0x20); returns
  // where it stopped. Room must have been reserved.
  const char* PutUnescaped(const char* p, const char* end) {
    char* out = at_;  // a local: stores through char* could alias at_ itself
    while (p < end && static_cast<unsigned char>(*p) >= 0x20 && *p != '"' && *p != '\\') *out++ = *p++;
    at_ = out;
    return p;
  }
  void Flush() {}

  // The text written so far (the stream is empty afterwards).
  std::string Take();

 private:
  void NewLine() {
    break_pending_ = false;
    *at_++ = '\n';
    for (int i = 0; i < indent_; ++i) *at_++ = ' ';
  }
  void Room(size_t n) {
    if (n > static_cast<size_t>(buffer_.data() + buffer_.size() - at_)) Grow(n);
  }
  void Grow(size_t n);

  std::string buffer_;  // written up to at_; the rest is room
  char* at_ = nullptr;
  bool break_pending_ = false;
  int indent_ = 0;
};

// RapidJSON writes through these when they are found for the stream type (argument-dependent
// lookup), as it does for its own StringBuffer.
inline void PutReserve(JsonTextStream& stream, size_t count) { stream.Reserve(count); }
inline void PutUnsafe(JsonTextStream& stream, char c) { stream.PutUnsafe(c); }

using JsonWriter = rapidjson::Writer<JsonTextStream>;

}  // namespace stagecraft::schedules

// RapidJSON's hook for copying the part of a string that needs no escaping in one go (it uses
// it for SIMD with its own StringBuffer): everything up to the next '"', '\\' or control
// character, which the writer then escapes itself. Bytes from 0x80 are copied as they are, as
// RapidJSON's UTF-8 to UTF-8 transcoding does.
template <>
inline bool stagecraft::schedules::JsonWriter::ScanWriteUnescapedString(rapidjson::StringStream& is, size_t length) {
  const char* const end = is.head_ + length;
  is.src_ = os_->PutUnescaped(is.src_, end);
  return is.src_ < end;
}

namespace stagecraft::schedules {

inline void Key(JsonWriter& writer, std::string_view name) {
  writer.Key(name.data(), static_cast<rapidjson::SizeType>(name.size()));
}

// A string value; bytes that are not well-formed UTF-8 become U+FFFD, so the text always parses.
void WriteString(JsonWriter& writer, std::string_view text);

// Members of the object being written, in the order given.
struct StringMember {
  std::string_view key;
  std::string_view value;
};
struct IntMember {
  std::string_view key;
  int64_t value;
};
inline void WriteMembers(JsonWriter& writer, std::initializer_list<StringMember> members) {
  for (const StringMember& m : members) {
    Key(writer, m.key);
    WriteString(writer, m.value);
  }
}
inline void WriteMembers(JsonWriter& writer, std::initializer_list<IntMember> members) {
  for (const IntMember& m : members) {
    Key(writer, m.key);
    writer.Int64(m.value);
  }
}

// `value` in its shortest round-trip digits (std::to_chars) laid out as JSON writers commonly
// do: decimal for 1e-4 <= |value| < 1e15 with ".0" on whole numbers ("33.0", "0.25"), otherwise
// one digit before the point and a signed exponent of at least two digits ("1.3e-05", "1e+15");
// "null" when it is not finite (JSON has no such number).
std::string ShortestNumberText(double value);

// A number whose text the caller formatted (e.g. "12.345", "0.250000").
inline void WriteNumberText(JsonWriter& writer, std::string_view text) {
  writer.RawValue(text.data(), text.size(), rapidjson::kNumberType);
}

}  // namespace stagecraft::schedules
