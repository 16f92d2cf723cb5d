// Whole JSON texts into RapidJSON's DOM (json_reader.h): its validating, iterative reader (no
// recursion, whatever the nesting) behind a handler that adds the two checks RapidJSON 1.1.0
// leaves out, and its error codes worded as the trace reader words them (json_cursor.h).
#include "json_reader.h"

#include <algorithm>
#include <charconv>
#include <climits>
#include <cmath>
#include <cstdint>
#include <cstring>

#include <fmt/format.h>

#include "json_writer.h"
#include "stagecraft/base/input_file.h"

namespace stagecraft::schedules {
namespace {

using rapidjson::SizeType;

// What made the handler stop the parse.
enum class Stop { kNone, kSurrogate, kOverflow };

// The Document's SAX handler, plus: a string decoded from an unpaired low surrogate ("\udc00")
// is no UTF-8 (its bytes ED B0..BF are those of an encoded surrogate), and a number that
// rounds past DBL_MAX (1.8e308) is no double.
class CheckedHandler {
 public:
  explicit CheckedHandler(rapidjson::Document* document) : d_(*document) {}
  Stop stop() const { return stop_; }

  bool Null() { return d_.Null(); }
  bool Bool(bool b) { return d_.Bool(b); }
  bool Int(int i) { return d_.Int(i); }
  bool Uint(unsigned u) { return d_.Uint(u); }
  bool Int64(int64_t i) { return d_.Int64(i); }
  bool Uint64(uint64_t u) { return d_.Uint64(u); }
  bool Double(double x) { return std::isfinite(x) ? d_.Double(x) : Halt(Stop::kOverflow); }
  // Every number comes as its text (kParseNumbersAsStringsFlag): RapidJSON 1.1.0's own
  // conversion reads a zero with a large exponent ("0e308") as garbage (1.9e289 or -6e-269,
  // and undefined behaviour in its DiyFp). Integers that fit 64 bits stay integers, as RapidJSON
  // keeps them; the rest is the correctly rounded double (std::from_chars); past DBL_MAX it is
  // an overflow, below the smallest denormal a signed zero.
  bool RawNumber(const char* s, SizeType n, bool /*copy*/) {
    const char* end = s + n;
    if (std::find_if(s, end, [](char c) { return c == '.' || c == 'e' || c == 'E'; }) == end) {
      if (*s == '-') {
        int64_t i = 0;
        if (std::from_chars(s, end, i).ec == std::errc()) return d_.Int64(i);
      } else {
        uint64_t u = 0;
        if (std::from_chars(s, end, u).ec == std::errc()) return d_.Uint64(u);
      }
    }
    double x = 0;
    const std::from_chars_result r = std::from_chars(s, end, x);
    if (r.ec == std::errc::result_out_of_range) return TooLargeOrTiny(s, end);
    return r.ec == std::errc() && r.ptr == end ? Double(x) : Halt(Stop::kOverflow);
  }
  bool String(const char* s, SizeType n, bool copy) { return Utf8(s, n) ? d_.String(s, n, copy) : Halt(Stop::kSurrogate); }
  bool Key(const char* s, SizeType n, bool copy) { return Utf8(s, n) ? d_.Key(s, n, copy) : Halt(Stop::kSurrogate); }
  bool StartObject() { return d_.StartObject(); }
  bool EndObject(SizeType n) { return d_.EndObject(n); }
  bool StartArray() { return d_.StartArray(); }
  bool EndArray(SizeType n) { return d_.EndArray(n); }

 private:
  bool Halt(Stop why) {
    stop_ = why;
    return false;
  }
  // Out of a double's range: past DBL_MAX, or closer to 0 than the smallest denormal (a signed
  // zero, as every conforming strtod rounds it). Which one: the decimal exponent of its first
  // significant digit.
  bool TooLargeOrTiny(const char* s, const char* end) {
    const char* e = std::find_if(s, end, [](char c) { return c == 'e' || c == 'E'; });
    int64_t exponent = 0;
    if (e != end) {
      const char* digits = e + 1 + (e + 1 < end && e[1] == '+');
      // Far past any double either way: clamped, so that adding the digits' place cannot overflow.
      constexpr int64_t kFar = int64_t{1} << 40;
      if (std::from_chars(digits, end, exponent).ec != std::errc()) exponent = digits < end && *digits == '-' ? -kFar : kFar;
      exponent = std::clamp(exponent, -kFar, kFar);
    }
    // Position of the first non-zero digit relative to the decimal point.
    const char* point = std::find(s, e, '.');
    int64_t lead = 0;
    bool found = false;
    for (const char* p = s; p < e && !found; ++p) {
      if (*p < '1' || *p > '9') continue;
      found = true;
      lead = p < point ? point - p - 1 : -(p - point);
    }
    if (!found || exponent + lead < 0) return d_.Double(*s == '-' ? -0.0 : 0.0);
    return Halt(Stop::kOverflow);
  }

  // The input was validated as UTF-8, so only an escape can have produced a surrogate.
  static bool Utf8(const char* s, SizeType n) {
    for (const char* p = s; (p = static_cast<const char*>(std::memchr(p, '\xED', s + n - p))) != nullptr; ++p) {
      if (p + 1 < s + n && static_cast<unsigned char>(p[1]) >= 0xA0) return false;
    }
    return true;
  }

  rapidjson::Document& d_;
  Stop stop_ = Stop::kNone;
};

// The error at `offset` of `text` in the trace reader's words; at the end, what ended early.
std::string What(rapidjson::ParseErrorCode code, Stop stop, std::string_view text, size_t offset) {
  using namespace rapidjson;
  const bool at_end = offset >= text.size();
  switch (code) {
    case kParseErrorDocumentRootNotSingular: return "unexpected text after the JSON value";
    case kParseErrorObjectMissColon: return "expected ':' after an object key";
    case kParseErrorObjectMissCommaOrCurlyBracket:
      return at_end ? "unexpected end of input" : "expected ',' or '}' after an object member";
    case kParseErrorArrayMissCommaOrSquareBracket:
      return at_end ? "unexpected end of input" : "expected ',' or ']' after an array element";
    case kParseErrorObjectMissName: return at_end ? "unexpected end of input" : "expected a string key";
    case kParseErrorStringUnicodeEscapeInvalidHex: return "expected 4 hex digits after \\u";
    case kParseErrorStringUnicodeSurrogateInvalid: return "unpaired UTF-16 surrogate in a string";
    case kParseErrorStringEscapeInvalid:
      return text[offset] == '\\' ? "invalid escape in a string" : "control character in a string (it must be escaped)";
    case kParseErrorStringMissQuotationMark:
      return at_end ? "unexpected end of input in a string" : "control character in a string (it must be escaped)";
    case kParseErrorStringInvalidEncoding: return "invalid UTF-8 in a string";
    case kParseErrorNumberMissFraction: return "expected a digit after '.'";
    case kParseErrorNumberMissExponent: return "expected a digit in the exponent";
    case kParseErrorTermination:
      return stop == Stop::kSurrogate ? "unpaired UTF-16 surrogate in a string" : "not valid JSON";
    default: break;  // an empty document, an invalid value
  }
  return at_end ? "unexpected end of input" : "expected a value";
}

}  // namespace

std::string JsonSyntaxError::Located() const {
  if (!overflow.empty()) return fmt::format("number overflow parsing '{}'", overflow);
  return fmt::format("{} at line {}, column {} (byte {})", what, line, column, offset);
}

bool ParseJson(std::string_view text, rapidjson::Document* document, JsonSyntaxError* error) {
  const size_t base = text.size() - WithoutByteOrderMark(text).size();
  // RapidJSON's streams end at a NUL byte, which JSON text never holds: read up to the first.
  const size_t nul = text.find('\0', base);
  const std::string_view body = text.substr(base, nul == std::string_view::npos ? std::string_view::npos : nul - base);
  rapidjson::MemoryStream stream(body.data(), body.size());
  CheckedHandler handler(document);
  rapidjson::Reader reader;
  rapidjson::ParseResult result;
  auto parse = [&](rapidjson::Document&) {
    result = reader.Parse<rapidjson::kParseValidateEncodingFlag | rapidjson::kParseNumbersAsStringsFlag |
                          rapidjson::kParseIterativeFlag>(stream, handler);
    return !result.IsError();
  };
  document->Populate(parse);
  if (!result.IsError() && nul == std::string_view::npos) return true;
  const size_t offset = result.IsError() ? base + result.Offset() : nul;
  const bool overflow = result.Code() == rapidjson::kParseErrorNumberTooBig || handler.stop() == Stop::kOverflow;
  if (overflow) {
    const size_t end = text.find_first_not_of("+-.0123456789eE", offset);
    error->overflow = std::string(text.substr(offset, end == std::string_view::npos ? end : end - offset));
  } else {
    error->what = result.IsError() ? What(result.Code(), handler.stop(), text, offset)
                                   : "unexpected text after the JSON value";
  }
  error->offset = offset;
  size_t line_start = 0;
  if (const size_t newline = offset == 0 ? std::string_view::npos : text.rfind('\n', offset - 1);
      newline != std::string_view::npos) {
    line_start = newline + 1;
  }
  error->line = 1 + static_cast<int>(std::count(text.begin(), text.begin() + offset, '\n'));
  error->column = static_cast<int>(offset - line_start) + 1;
  document->SetNull();
  return false;
}

const JsonValue* FindMember(const JsonValue& object, std::string_view key) {
  for (auto it = object.MemberEnd(); it != object.MemberBegin();) {
    --it;
    if (StringOf(it->name) == key) return &it->value;
  }
  return nullptr;
}

std::string_view TypeName(const JsonValue& v) {
  if (v.IsNull()) return "null";
  if (v.IsBool()) return "boolean";
  if (v.IsNumber()) return "number";
  if (v.IsString()) return "string";
  return v.IsArray() ? "array" : "object";
}

std::string NumberText(const JsonValue& v) {
  if (v.IsUint64()) return std::to_string(v.GetUint64());
  if (v.IsInt64()) return std::to_string(v.GetInt64());
  return ShortestNumberText(v.GetDouble());
}

}  // namespace stagecraft::schedules
