// JsonOut (json_out.h): RapidJSON's writer on the library's text stream (json_writer.h).
#include "stagecraft/schedules/json_out.h"

#include "json_writer.h"

namespace stagecraft::schedules {

struct JsonOut::Impl {
  JsonTextStream stream;
  JsonWriter writer{stream};
};

JsonOut::JsonOut() : impl_(std::make_unique<Impl>()) {}
JsonOut::~JsonOut() = default;

// The structure, then the scalars; each returns the writer for the next call.
JsonOut& JsonOut::StartObject() { return impl_->writer.StartObject(), *this; }
JsonOut& JsonOut::EndObject() { return impl_->writer.EndObject(), *this; }
JsonOut& JsonOut::StartArray() { return impl_->writer.StartArray(), *this; }
JsonOut& JsonOut::EndArray() { return impl_->writer.EndArray(), *this; }
JsonOut& JsonOut::Key(std::string_view key) { return schedules::Key(impl_->writer, key), *this; }

JsonOut& JsonOut::String(std::string_view text) { return WriteString(impl_->writer, text), *this; }
JsonOut& JsonOut::Int(int64_t value) { return impl_->writer.Int64(value), *this; }
JsonOut& JsonOut::Null() { return impl_->writer.Null(), *this; }
JsonOut& JsonOut::Bool(bool value) { return impl_->writer.Bool(value), *this; }

JsonOut& JsonOut::Strings(const std::vector<std::string>& items) {
  StartArray();
  for (const std::string& item : items) String(item);
  return EndArray();
}

JsonOut& JsonOut::Number(double value) {
  const std::string text = ShortestNumberText(value);
  if (text == "null") return Null();
  WriteNumberText(impl_->writer, text);
  return *this;
}

// A complete value; RapidJSON needs only to know it is not a key.
JsonOut& JsonOut::Raw(std::string_view json) {
  impl_->writer.RawValue(json.data(), json.size(), rapidjson::kObjectType);
  return *this;
}

std::string JsonOut::Take() {
  SC_CHECK(impl_->writer.IsComplete(), "a JsonOut value is complete when taken");
  std::string text = impl_->stream.Take();
  impl_->writer.Reset(impl_->stream);
  return text;
}

}  // namespace stagecraft::schedules
