// Reading whole JSON texts (metrics files, schedule files, a trace's header) into RapidJSON's
// DOM as strictly as RFC 8259 reads: well-formed UTF-8, paired surrogates, finite numbers,
// nothing after the value. A syntax error says what was expected, and where.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

#include "json_rapidjson.h"

namespace stagecraft::schedules {

using JsonValue = rapidjson::Value;

struct JsonSyntaxError {
  std::string what;      // "expected ',' or '}' after an object member"
  size_t offset = 0;     // 0-based byte offset into the text
  int line = 1, column = 1;
  std::string overflow;  // a number beyond a double: its text ("1e400"), and `what` is empty
  // "WHAT at line L, column C (byte B)", or "number overflow parsing 'N'".
  std::string Located() const;
};

// Parses `text` into `document` (a UTF-8 byte order mark at its start is skipped); false and
// `error` filled on a syntax error. Objects keep every member in order, duplicates included
// (FindMember returns the last, as every reader here takes the last).
bool ParseJson(std::string_view text, rapidjson::Document* document, JsonSyntaxError* error);

// The member `key` of an object (the last of that name), or null.
const JsonValue* FindMember(const JsonValue& object, std::string_view key);

inline bool IsInteger(const JsonValue& v) { return v.IsInt64() || v.IsUint64(); }
inline std::string_view StringOf(const JsonValue& v) { return {v.GetString(), v.GetStringLength()}; }
// "null", "boolean", "number", "string", "array" or "object".
std::string_view TypeName(const JsonValue& v);
// A number as JSON text: an integer's digits, a float in shortest form ("-90.0", "1.5").
std::string NumberText(const JsonValue& v);

}  // namespace stagecraft::schedules
