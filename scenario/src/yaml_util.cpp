// Checked reading of yaml-cpp trees: typed values, known-key maps and located error messages.
#include "yaml_util.h"

#include <fmt/format.h>
#include <yaml-cpp/depthguard.h>
#include <yaml-cpp/eventhandler.h>

#include <algorithm>
#include <charconv>
#include <cctype>
#include <cmath>
#include <filesystem>
#include <sstream>
#include <string>
#include <vector>

#include "stagecraft/base/error.h"
#include "stagecraft/base/input_file.h"
#include "stagecraft/base/spelling.h"
#include "stagecraft/schedules/ir.h"
#include "stagecraft/scenario/limits.h"
#include "stagecraft/scenario/units.h"

namespace stagecraft::sim::yaml {
namespace {

using stagecraft::InputError;

bool StartsWith(std::string_view text, std::string_view prefix) {
  return text.size() >= prefix.size() && text.substr(0, prefix.size()) == prefix;
}

std::string JoinPath(std::string_view parent, std::string_view key) {
  return parent.empty() ? std::string(key) : fmt::format("{}.{}", parent, key);
}

std::string UnknownKeyMessage(std::string_view key, std::initializer_list<std::string_view> known) {
  return fmt::format("unknown key '{}' (known: {}){}", key, fmt::join(known, ", "),
                     DidYouMean(key, std::vector<std::string_view>(known)));
}

}  // namespace

std::string DidYouMean(std::string_view word, std::span<const std::string_view> known) {
  const std::string nearest = NearestName(word, known, 2, /*ignore_case=*/true);
  return nearest.empty() ? std::string() : fmt::format("; did you mean '{}'?", nearest);
}

Override ParseOverride(const std::string& text) {
  const size_t eq = text.find('=');
  if (eq == std::string::npos || eq == 0) {
    throw InputError(fmt::format("--set {}: expected key.path=value, e.g. pipeline.microbatches=32", text));
  }
  Override ov;
  ov.text = text;
  ov.path = text.substr(0, eq);
  const std::string value = text.substr(eq + 1);
  if (ov.path.front() == '.' || ov.path.back() == '.' || ov.path.find("..") != std::string::npos) {
    throw InputError(fmt::format("--set {}: key path '{}' has an empty component", text, ov.path));
  }
  try {
    ov.value = YAML::Load(value);
  } catch (const YAML::DeepRecursion& e) {
    throw InputError(fmt::format("--set {}: value nested more than {} levels deep, the YAML parser's limit", ov.path,
                                 e.depth()));
  } catch (const YAML::Exception& e) {
    throw InputError(fmt::format("--set {}: value is not valid YAML: {}", ov.path, e.msg));
  }
  return ov;
}

namespace {

// Records where each document starts, and where its root value does; the rest is ignored.
class DocumentStarts final : public YAML::EventHandler {
 public:
  std::vector<YAML::Mark> marks, roots;
  void OnDocumentStart(const YAML::Mark& mark) override { marks.push_back(mark); }
  void OnDocumentEnd() override {}
  void OnNull(const YAML::Mark& mark, YAML::anchor_t) override { Root(mark); }
  void OnAlias(const YAML::Mark& mark, YAML::anchor_t) override { Root(mark); }
  void OnScalar(const YAML::Mark& mark, const std::string&, YAML::anchor_t, const std::string&) override { Root(mark); }
  void OnSequenceStart(const YAML::Mark& mark, const std::string&, YAML::anchor_t, YAML::EmitterStyle::value) override {
    Root(mark);
  }
  void OnSequenceEnd() override {}
  void OnMapStart(const YAML::Mark& mark, const std::string&, YAML::anchor_t, YAML::EmitterStyle::value) override {
    Root(mark);
  }
  void OnMapEnd() override {}

 private:
  void Root(const YAML::Mark& mark) {
    if (roots.size() < marks.size()) roots.push_back(mark);
  }
};

}  // namespace

// The one document of `text`. Not YAML::LoadAll: yaml-cpp 0.7 loops there for ever on streams
// such as a lone ',' (each round an empty document that consumes nothing, upstream issue
// #1040), so at most two documents are parsed, and a second one that starts where the first
// did is that loop, reported at the token yaml-cpp cannot read.
YAML::Node LoadText(std::string_view text, const std::string& source) {
  const auto fail = [&](const YAML::Mark& mark, const std::string& what) {
    const int line = mark.is_null() ? 1 : mark.line + 1;
    const int column = mark.is_null() ? 1 : mark.column + 1;
    throw InputError(fmt::format("{}:{}:{}: {}", source, line, column, what));
  };
  // yaml-cpp reads a NUL byte as the end of a line inside an escape and reports the wrong line.
  if (const size_t nul = text.find('\0'); nul != std::string_view::npos) {
    const std::string_view before = text.substr(0, nul);
    const size_t line_start = before.rfind('\n') + 1;  // npos + 1 == 0
    YAML::Mark mark;
    mark.line = static_cast<int>(std::count(before.begin(), before.end(), '\n'));
    mark.column = static_cast<int>(nul - line_start);
    fail(mark, "a NUL byte; YAML text holds none (is this a binary file?)");
  }
  YAML::Node document;
  try {
    std::istringstream stream{std::string(text)};
    YAML::Parser parser(stream);
    DocumentStarts starts;
    while (starts.marks.size() < 2 && parser.HandleNextDocument(starts)) {
    }
    if (starts.marks.size() == 2) {
      const YAML::Mark& second = starts.marks[1];
      if (second.pos == starts.marks[0].pos) {
        const size_t at = static_cast<size_t>(std::max(second.pos, 0));
        fail(second, fmt::format("unexpected '{}' where a value, a key or a '- ' item belongs",
                                 at < text.size() ? text.substr(at, 1) : std::string_view("?")));
      }
      // A second document would be ignored: refuse it where its value starts.
      fail(starts.roots.size() == 2 ? starts.roots[1] : second,
           "a second YAML document ('---' starts one); expected one document");
    }
    if (starts.marks.empty()) return YAML::Node();
    document = YAML::Load(std::string(text));
  } catch (const YAML::DeepRecursion& e) {
    fail(e.mark, fmt::format("nested more than {} levels deep, the YAML parser's limit", e.depth()));
  } catch (const YAML::Exception& e) {
    fail(e.mark, e.msg);
  }
  return document;
}

std::string ReadFile(const std::string& path, std::string_view what) {
  return stagecraft::ReadInputFile(path, stagecraft::kMaxYamlBytes, what);
}

YAML::Node LoadFile(const std::string& path, std::string_view what) { return LoadText(ReadFile(path, what), path); }

std::string DirOf(const std::string& path) { return std::filesystem::path(path).parent_path().string(); }

Value::Value(YAML::Node node, std::string path, Origin origin, const std::vector<Override>* overrides)
    : node_(std::move(node)), path_(std::move(path)), origin_(std::move(origin)), overrides_(overrides) {}

Value& Value::operator=(const Value& other) {
  node_.reset(other.node_);
  path_ = other.path_;
  origin_ = other.origin_;
  overrides_ = other.overrides_;
  return *this;
}

std::string Value::Located(std::string_view what) const {
  if (origin_.from_override) {
    const std::string& set_path = (*overrides_)[origin_.override_index].path;
    if (set_path == path_ || path_.empty()) return fmt::format("--set {}: {}", set_path, what);
    return fmt::format("--set {}: {}: {}", set_path, path_, what);
  }
  const YAML::Mark mark = node_.Mark();
  // A map with no position was created by a --set that reached below it ("training.lr=0"
  // with no training block): name that override.
  if (mark.is_null() && overrides_ != nullptr && !path_.empty()) {
    for (auto ov = overrides_->rbegin(); ov != overrides_->rend(); ++ov) {
      if (StartsWith(ov->path, path_ + ".")) return fmt::format("--set {}: {}: {}", ov->text, path_, what);
    }
  }
  const int line = mark.is_null() ? 1 : mark.line + 1;
  const int column = mark.is_null() ? 1 : mark.column + 1;
  if (path_.empty()) return fmt::format("{}:{}:{}: {}", origin_.file, line, column, what);
  return fmt::format("{}:{}:{}: {}: {}", origin_.file, line, column, path_, what);
}

void Value::Fail(std::string_view what) const { throw InputError(Located(what)); }

Value Value::At(std::string_view key_path) const {
  if (key_path.empty()) return *this;
  Value at = *this;
  size_t start = 0;
  while (start <= key_path.size()) {
    const size_t dot = std::min(key_path.find('.', start), key_path.size());
    const std::string key(key_path.substr(start, dot - start));
    const YAML::Node& node = at.node_;
    size_t index = 0;
    const auto [end, ec] = std::from_chars(key.data(), key.data() + key.size(), index);
    if (node.IsMap() && node[key]) {
      at = at.Child(key, node[key]);
    } else if (node.IsSequence() && ec == std::errc() && end == key.data() + key.size() && index < node.size()) {
      at = at.Element(index);
    } else {
      // Not in the tree (a default): its parent's place, under the whole key path.
      return Value(at.node_, JoinPath(path_, key_path), at.origin_, overrides_);
    }
    start = dot + 1;
  }
  return at;
}

Value Value::Child(std::string_view key, YAML::Node child) const {
  std::string path = JoinPath(path_, key);
  Origin origin = origin_;
  if (overrides_ != nullptr) {
    for (int i = static_cast<int>(overrides_->size()) - 1; i > origin_.override_index; --i) {
      if ((*overrides_)[i].path == path) {
        origin = Origin{"", "", i, true};
        break;
      }
    }
  }
  return Value(std::move(child), std::move(path), std::move(origin), overrides_);
}

Value Value::Element(size_t index) const { return Child(std::to_string(index), node_[index]); }

std::vector<Value> Value::Elements() const {
  if (!node_.IsSequence()) Fail(fmt::format("expected a list, got {}", Describe()));
  std::vector<Value> elements;
  for (size_t i = 0; i < node_.size(); ++i) elements.push_back(Element(i));
  return elements;
}

std::string Value::Describe() const {
  switch (node_.Type()) {
    case YAML::NodeType::Scalar:
      return fmt::format("'{}'", node_.Scalar());
    case YAML::NodeType::Map:
      return "a map";
    case YAML::NodeType::Sequence:
      return "a list";
    default:
      return "nothing";
  }
}

std::string Value::String() const {
  if (!node_.IsScalar() || node_.Scalar().empty()) Fail(fmt::format("expected a non-empty string, got {}", Describe()));
  return node_.Scalar();
}

std::string Value::Choice(std::initializer_list<std::string_view> options) const {
  return Choice(std::span<const std::string_view>(options.begin(), options.size()));
}

std::string Value::Choice(std::span<const std::string_view> options) const {
  const std::string expected = fmt::format("one of {}", fmt::join(options, ", "));
  if (!node_.IsScalar()) Fail(fmt::format("expected {}, got {}", expected, Describe()));
  const std::string& text = node_.Scalar();
  if (std::find(options.begin(), options.end(), text) == options.end()) {
    Fail(fmt::format("expected {}, got {}", expected, Describe()));
  }
  return text;
}

int64_t Value::Int(int64_t min, int64_t max) const {
  // Large maxima only guard against overflow: they are named when exceeded, not up front.
  const bool small_max = max < (int64_t{1} << 30);
  const std::string expected =
      small_max ? fmt::format("an integer in [{}, {}]", min, max) : fmt::format("an integer >= {}", min);
  if (!node_.IsScalar()) Fail(fmt::format("expected {}, got {}", expected, Describe()));
  const std::string& text = node_.Scalar();
  int64_t value = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  const bool parsed = ec == std::errc() && end == text.data() + text.size();
  if (!small_max && (ec == std::errc::result_out_of_range || (parsed && value > max))) {
    Fail(fmt::format("expected {} and at most {}, got {}", expected, max, Describe()));
  }
  if (!parsed || value < min || value > max) Fail(fmt::format("expected {}, got {}", expected, Describe()));
  return value;
}

double Value::Double(double min_exclusive, double max_inclusive) const {
  const std::string expected = std::isinf(max_inclusive)
                                   ? fmt::format("a number > {}", min_exclusive)
                                   : fmt::format("a number in ({}, {}]", min_exclusive, max_inclusive);
  if (!node_.IsScalar()) Fail(fmt::format("expected {}, got {}", expected, Describe()));
  const std::string& text = node_.Scalar();
  double value = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || end != text.data() + text.size() || !std::isfinite(value) || value <= min_exclusive ||
      value > max_inclusive) {
    Fail(fmt::format("expected {}, got {}", expected, Describe()));
  }
  return value;
}

bool Value::Bool() const {
  if (node_.IsScalar()) {
    const std::string& text = node_.Scalar();
    if (text == "true") return true;
    if (text == "false") return false;
  }
  Fail(fmt::format("expected true or false, got {}", Describe()));
}

double Value::DoubleIn(double min, double max, std::string_view noun) const {
  const std::string expected = fmt::format("{} from {} to {}", noun, min, max);
  if (!node_.IsScalar()) Fail(fmt::format("expected {}, got {}", expected, Describe()));
  const std::string& text = node_.Scalar();
  double value = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || end != text.data() + text.size() || !std::isfinite(value) || value < min || value > max) {
    Fail(fmt::format("expected {}, got {}", expected, Describe()));
  }
  return value;
}

int64_t Value::Bytes(int64_t min_bytes) const {
  if (!node_.IsScalar()) Fail(fmt::format("expected a size like 80GiB, got {}", Describe()));
  double bytes = 0;
  try {
    bytes = ParseBytesAsDouble(node_.Scalar());
  } catch (const InputError& e) {
    Fail(e.what());
  }
  if (bytes > static_cast<double>(kMaxValueBytes)) {
    Fail(fmt::format("expected a size of at most 1PiB (the limit per value), got {}", Describe()));
  }
  const int64_t exact = ParseBytes(node_.Scalar());  // fits: at most 2^50
  if (exact < min_bytes) {
    Fail(min_bytes == 1 ? fmt::format("expected a size > 0 like 80GiB, got {}", Describe())
                        : fmt::format("expected a size of at least {}B, got {}", min_bytes, Describe()));
  }
  return exact;
}

int64_t Value::DurationNs() const {
  if (!node_.IsScalar()) Fail(fmt::format("expected a duration like 2us, got {}", Describe()));
  double ns = 0;
  try {
    ns = ParseDurationNsAsDouble(node_.Scalar());
  } catch (const InputError& e) {
    Fail(e.what());
  }
  if (ns > static_cast<double>(kMaxOpNs)) {
    Fail(fmt::format("expected a duration of at most 3600s (1 h, the limit per op), got {}", Describe()));
  }
  return ParseDurationNs(node_.Scalar());  // fits: at most 3.6e12
}

double Value::Bandwidth() const {
  if (!node_.IsScalar()) Fail(fmt::format("expected a bandwidth like 50GB/s, got {}", Describe()));
  double value = 0;
  try {
    value = ParseBandwidth(node_.Scalar());
  } catch (const InputError& e) {
    Fail(e.what());
  }
  if (value < kMinBandwidthBytesPerS || value > kMaxBandwidthBytesPerS) {
    Fail(fmt::format("expected a bandwidth from 1KB/s to 10PB/s, got {}", Describe()));
  }
  return value;
}

double Value::Flops() const {
  if (!node_.IsScalar()) Fail(fmt::format("expected a compute rate like 989TFLOPS, got {}", Describe()));
  double value = 0;
  try {
    value = ParseFlops(node_.Scalar());
  } catch (const InputError& e) {
    Fail(e.what());
  }
  if (value < kMinPeakFlops || value > kMaxPeakFlops) {
    Fail(fmt::format("expected a compute rate from 1MFLOPS to 1EFLOPS, got {}", Describe()));
  }
  return value;
}

std::string Value::FilePath() const {
  const std::filesystem::path path(String());
  if (path.is_absolute() || origin_.dir.empty()) return path.string();
  return (std::filesystem::path(origin_.dir) / path).lexically_normal().string();
}

std::string Value::ReadableFilePath() const {
  const std::string path = FilePath();
  try {
    stagecraft::CheckInputFile(path);
  } catch (const InputError& e) {
    Fail(e.what());
  }
  return path;
}

Map::Map(const Value& value, std::initializer_list<std::string_view> known) : value_(value) {
  if (!value.IsMap()) {
    value.Fail(fmt::format("expected a map with keys {}, got {}", fmt::join(known, ", "), value.Describe()));
  }
  for (auto it = value.node().begin(); it != value.node().end(); ++it) {
    const Value key(it->first, value.path(), value.origin(), value.overrides());
    if (!it->first.IsScalar()) key.Fail(fmt::format("expected a key name, got {}", key.Describe()));
    const std::string name = it->first.Scalar();
    if (std::find(known.begin(), known.end(), name) == known.end()) {
      // A key that a --set created: name the override, not a position in the file.
      const std::string path = JoinPath(value.path(), name);
      if (value.overrides() != nullptr) {
        for (auto ov = value.overrides()->rbegin(); ov != value.overrides()->rend(); ++ov) {
          if (ov->path == path || StartsWith(ov->path, path + ".")) {
            throw InputError(fmt::format("--set {}: {}", ov->text, UnknownKeyMessage(name, known)));
          }
        }
      }
      key.Fail(UnknownKeyMessage(name, known));
    }
    for (const auto& entry : entries_) {
      if (entry.first == name) key.Fail(fmt::format("duplicate key '{}'", name));
    }
    entries_.emplace_back(name, it->second);
  }
}

bool Map::Has(std::string_view key) const { return Find(key).has_value(); }

std::optional<Value> Map::Find(std::string_view key) const {
  for (const auto& [name, node] : entries_) {
    if (name == key) return value_.Child(key, node);
  }
  return std::nullopt;
}

Value Map::Get(std::string_view key) const {
  std::optional<Value> found = Find(key);
  if (!found) value_.Fail(fmt::format("missing required key '{}'", key));
  return *found;
}

}  // namespace stagecraft::sim::yaml
