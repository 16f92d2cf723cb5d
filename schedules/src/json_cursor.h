// A validating JSON cursor (RFC 8259, UTF-8 in strings included) that decodes only what its
// caller asks for and checks and skips the rest: the trace reader's fast path. Strings without
// escapes are views into the text; errors name the source, line, column and byte offset.
#pragma once

#include <algorithm>
#include <charconv>
#include <cstdint>
#include <string>
#include <string_view>

#include <fmt/format.h>

#include "stagecraft/base/check.h"
#include "stagecraft/base/error.h"
#include "utf8.h"

namespace stagecraft::schedules {

// One scalar value; containers, booleans and null read as kOther (no trace field takes them).
struct Scalar {
  enum Type { kOther, kInt, kFloat, kString } type = kOther;
  int64_t i = 0;
  double d = 0;
  std::string_view s;
};

// Walks JSON text, validating all of it.
class JsonCursor {
 public:
  JsonCursor(std::string_view text, std::string_view source)
      : begin_(text.data()), p_(text.data()), end_(text.data() + text.size()), source_(source) {}

  [[noreturn]] void Fail(std::string_view what) const {
    const char* line_start = p_;
    while (line_start > begin_ && line_start[-1] != '\n') --line_start;
    throw InputError(fmt::format("{}: not valid JSON: {} at line {}, column {} (byte {})", source_, what,
                                 1 + std::count(begin_, p_, '\n'), p_ - line_start + 1, p_ - begin_));
  }

  // Skips whitespace; the next character, or '\0' at the end.
  char Peek() {
    while (p_ < end_ && (*p_ == ' ' || *p_ == '\n' || *p_ == '\r' || *p_ == '\t')) ++p_;
    return p_ < end_ ? *p_ : '\0';
  }
  bool AtEnd() { return Peek() == '\0' && p_ == end_; }
  const char* pos() const { return p_; }

  // Calls member(key) for each member of the object at the cursor; member reads the value.
  // The key may live in scratch space that the value overwrites: use it before reading.
  template <typename Member>
  void Object(Member&& member) {
    Enter('{');
    if (Peek() == '}') return Leave();
    while (true) {
      if (Peek() != '"') Fail(p_ == end_ ? "unexpected end of input" : "expected a string key");
      const std::string_view key = String(&key_scratch_);
      if (Peek() != ':') Fail("expected ':' after an object key");
      ++p_;
      member(key);
      const char c = Peek();
      if (c == '}') return Leave();
      if (c != ',') Fail(p_ == end_ ? "unexpected end of input" : "expected ',' or '}' after an object member");
      ++p_;
    }
  }

  template <typename Element>
  void Array(Element&& element) {
    Enter('[');
    if (Peek() == ']') return Leave();
    while (true) {
      element();
      const char c = Peek();
      if (c == ']') return Leave();
      if (c != ',') Fail(p_ == end_ ? "unexpected end of input" : "expected ',' or ']' after an array element");
      ++p_;
    }
  }

  // Reads any value; containers are checked and skipped.
  Scalar Value() {
    const char c = Peek();
    if (c == '"') return Scalar{Scalar::kString, 0, 0, String(&value_scratch_)};
    if (c == '-' || (c >= '0' && c <= '9')) return Number();
    if (c == '{') Object([this](std::string_view) { Value(); });
    else if (c == '[') Array([this] { Value(); });
    else if (!Literal("true") && !Literal("false") && !Literal("null")) {
      Fail(p_ == end_ ? "unexpected end of input" : "expected a value");
    }
    return Scalar{};
  }

 private:
  static constexpr int kMaxDepth = 512;

  void Enter(char open) {
    if (++depth_ > kMaxDepth) Fail("nested deeper than 512 levels");
    SC_CHECK(*p_ == open, "container expected at cursor");
    ++p_;
  }
  void Leave() {
    --depth_;
    ++p_;
  }

  bool Literal(std::string_view word) {
    if (static_cast<size_t>(end_ - p_) < word.size() || std::string_view(p_, word.size()) != word) return false;
    p_ += word.size();
    return true;
  }

  bool Digits() {
    const char* start = p_;
    while (p_ < end_ && *p_ >= '0' && *p_ <= '9') ++p_;
    return p_ > start;
  }

  Scalar Number() {
    const char* start = p_;
    if (*p_ == '-') ++p_;
    if (p_ < end_ && *p_ == '0') {
      ++p_;
    } else if (!Digits()) {
      Fail("expected a digit");
    }
    bool integral = true;
    if (p_ < end_ && *p_ == '.') {
      ++p_;
      integral = false;
      if (!Digits()) Fail("expected a digit after '.'");
    }
    if (p_ < end_ && (*p_ == 'e' || *p_ == 'E')) {
      ++p_;
      integral = false;
      if (p_ < end_ && (*p_ == '+' || *p_ == '-')) ++p_;
      if (!Digits()) Fail("expected a digit in the exponent");
    }
    Scalar v;
    if (integral && std::from_chars(start, p_, v.i).ec == std::errc()) {
      v.type = Scalar::kInt;
    } else if (std::from_chars(start, p_, v.d).ec == std::errc()) {
      v.type = Scalar::kFloat;  // out-of-range integers too, as in most JSON readers
    }
    return v;
  }

  // The string at the cursor, unescaped: a view into the text when it has nothing to decode.
  std::string_view String(std::string* scratch) {
    const char* start = ++p_;
    while (p_ < end_) {
      const auto c = static_cast<unsigned char>(*p_);
      if (c == '"') return std::string_view(start, p_++ - start);
      if (c == '\\' || c < 0x20 || c >= 0x80) break;
      ++p_;
    }
    scratch->assign(start, p_);
    while (true) {
      if (p_ == end_) Fail("unexpected end of input in a string");
      const auto c = static_cast<unsigned char>(*p_);
      if (c == '"') {
        ++p_;
        return *scratch;
      }
      if (c < 0x20) Fail("control character in a string (it must be escaped)");
      if (c == '\\') {
        Escape(scratch);
      } else if (c >= 0x80) {
        Utf8(scratch);
      } else {
        scratch->push_back(*p_++);
      }
    }
  }

  void Escape(std::string* out) {
    if (end_ - p_ < 2) Fail("unexpected end of input in a string");
    const char c = p_[1];
    constexpr std::string_view kFrom = "\"\\/bfnrt", kTo = "\"\\/\b\f\n\r\t";
    if (const size_t k = kFrom.find(c); k != std::string_view::npos) {
      out->push_back(kTo[k]);
      p_ += 2;
      return;
    }
    if (c != 'u') Fail("invalid escape in a string");
    uint32_t code = Hex4();
    if (code >= 0xDC00 && code <= 0xDFFF) Fail("unpaired UTF-16 surrogate in a string");
    if (code >= 0xD800 && code <= 0xDBFF) {
      if (end_ - p_ < 2 || p_[0] != '\\' || p_[1] != 'u') Fail("unpaired UTF-16 surrogate in a string");
      const uint32_t low = Hex4();
      if (low < 0xDC00 || low > 0xDFFF) Fail("unpaired UTF-16 surrogate in a string");
      code = 0x10000 + ((code - 0xD800) << 10) + (low - 0xDC00);
    }
    char utf8[4];
    int n = 0;
    if (code < 0x80) {
      utf8[n++] = static_cast<char>(code);
    } else if (code < 0x800) {
      utf8[n++] = static_cast<char>(0xC0 | code >> 6);
    } else if (code < 0x10000) {
      utf8[n++] = static_cast<char>(0xE0 | code >> 12);
      utf8[n++] = static_cast<char>(0x80 | (code >> 6 & 0x3F));
    } else {
      utf8[n++] = static_cast<char>(0xF0 | code >> 18);
      utf8[n++] = static_cast<char>(0x80 | (code >> 12 & 0x3F));
      utf8[n++] = static_cast<char>(0x80 | (code >> 6 & 0x3F));
    }
    if (code >= 0x80) utf8[n++] = static_cast<char>(0x80 | (code & 0x3F));
    out->append(utf8, n);
  }

  // "\uXXXX" at the cursor.
  uint32_t Hex4() {
    uint32_t code = 0;
    const char* hex = p_ + 2;
    if (end_ - hex < 4 || std::from_chars(hex, hex + 4, code, 16).ptr != hex + 4) Fail("expected 4 hex digits after \\u");
    p_ = hex + 4;
    return code;
  }

  // One multi-byte UTF-8 sequence, well-formed (utf8.h).
  void Utf8(std::string* out) {
    const int len = Utf8Sequence(p_, end_);
    if (len <= 0) Fail("invalid UTF-8 in a string");
    out->append(p_, len);
    p_ += len;
  }

  const char* begin_;
  const char* p_;
  const char* end_;
  std::string_view source_;
  int depth_ = 0;
  std::string key_scratch_;
  std::string value_scratch_;
};

}  // namespace stagecraft::schedules
