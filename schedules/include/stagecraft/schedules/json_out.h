// JSON for outputs beyond this library's file formats (compare's --json report): the writer of
// every file here (RapidJSON's, strings repaired to UTF-8, numbers in shortest round-trip form)
// behind a small streaming interface. Members come out in the order they are written.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace stagecraft::schedules {

class JsonOut {
 public:
  JsonOut();
  ~JsonOut();
  JsonOut(const JsonOut&) = delete;
  JsonOut& operator=(const JsonOut&) = delete;

  // Each returns the writer, so a member reads as out.Key("ranks").Int(4). Writing a value
  // where a key belongs, or the reverse, is a bug (SC_CHECK).
  JsonOut& StartObject();
  JsonOut& EndObject();
  JsonOut& StartArray();
  JsonOut& EndArray();
  JsonOut& Key(std::string_view key);
  JsonOut& String(std::string_view text);  // bytes that are not UTF-8 become U+FFFD
  JsonOut& Int(int64_t value);
  JsonOut& Number(double value);  // "33.0", "1.3e-05", "1e+15"; null when not finite
  JsonOut& Null();
  JsonOut& Bool(bool value);
  JsonOut& Strings(const std::vector<std::string>& items);  // an array of strings
  // A complete value that another JsonOut wrote (Take), as it is.
  JsonOut& Raw(std::string_view json);

  // The value written, complete (SC_CHECK); the writer starts empty again.
  std::string Take();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace stagecraft::schedules
