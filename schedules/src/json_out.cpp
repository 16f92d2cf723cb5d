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

JsonOut& JsonOut::StartObject() {
  impl_->writer.StartObject();
  return *this;
}
JsonOut& JsonOut::EndObject() {
  impl_->writer.EndObject();
  return *this;
}
JsonOut& JsonOut::StartArray() {
  impl_->writer.StartArray();
  return *this;
}
JsonOut& JsonOut::EndArray() {
  impl_->writer.EndArray();
  return *this;
}
JsonOut& JsonOut::Key(std::string_view key) {
  schedules::Key(impl_->writer, key);
  return *this;
}
JsonOut& JsonOut::String(std::string_view text) {
  WriteString(impl_->writer, text);
  return *this;
}
JsonOut& JsonOut::Int(int64_t value) {
  impl_->writer.Int64(value);
  return *this;
}
JsonOut& JsonOut::Number(double value) {
  const std::string text = ShortestNumberText(value);
  if (text == "null") return Null();
  WriteNumberText(impl_->writer, text);
  return *this;
}
JsonOut& JsonOut::Null() {
  impl_->writer.Null();
  return *this;
}
JsonOut& JsonOut::Bool(bool value) {
  impl_->writer.Bool(value);
  return *this;
}
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
