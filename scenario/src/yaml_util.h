// Checked reading of yaml-cpp trees for scenario and profile files: every value knows its key
// path and where it came from (a file position or a --set override), so that each error names
// the place to fix and the form expected. Internal to sim/src: headers never see yaml-cpp.
#pragma once

#include <yaml-cpp/yaml.h>

#include <cstdint>
#include <initializer_list>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "stagecraft/base/error.h"
#include "stagecraft/scenario/enum_names.h"

namespace stagecraft::sim::yaml {

// One --set override "key.path=value".
struct Override {
  std::string text;  // as given: "pipeline.microbatches=32"
  std::string path;  // "pipeline.microbatches"
  YAML::Node value;  // the value parsed as YAML
};

// Where a subtree came from.
struct Origin {
  std::string file;         // for "file:line:col" when not from an override
  std::string dir;          // base of relative paths in this subtree; "" = current directory
  int override_index = -1;  // newest override this subtree lies under; -1 none
  bool from_override = false;
};

// Parses "key.path=value" (value as YAML); throws InputError "--set TEXT: ..." when malformed.
Override ParseOverride(const std::string& text);

// `text` parsed as one YAML document; a syntax error throws InputError "source:line:col:
// <yaml-cpp message>", and so does a second document ("---" then more), which would otherwise
// be ignored.
YAML::Node LoadText(std::string_view text, const std::string& source);
// The file's text, read by stagecraft::ReadInputFile up to kMaxYamlBytes: a file that cannot be
// read throws InputError "path: cannot read: is a directory" (or the other reason), one over the
// limit "path: larger than 64 MiB, the limit for WHAT" (`what`: "a scenario file").
std::string ReadFile(const std::string& path, std::string_view what);
// The file parsed as YAML (ReadFile, then LoadText).
YAML::Node LoadFile(const std::string& path, std::string_view what);

// "; did you mean 'NAME'?" for the known name nearest to `word` (case aside) within two edits, or
// "" when none is that near: for unknown keys and names.
std::string DidYouMean(std::string_view word, std::span<const std::string_view> known);

// The directory of `path`, "" for a bare file name.
std::string DirOf(const std::string& path);

// A node with its key path and origin.
class Value {
 public:
  Value(YAML::Node node, std::string path, Origin origin, const std::vector<Override>* overrides);
  Value(const Value&) = default;
  // YAML::Node's own assignment writes through into the tree; this one only rebinds.
  Value& operator=(const Value& other);

  const YAML::Node& node() const { return node_; }
  const std::string& path() const { return path_; }
  const Origin& origin() const { return origin_; }
  const std::vector<Override>* overrides() const { return overrides_; }

  // "file:line:col: key.path: what", or "--set key.path: what" for override values.
  std::string Located(std::string_view what) const;
  // Throws InputError(Located(what)).
  [[noreturn]] void Fail(std::string_view what) const;

  // The value at `key` of this map / entry `index` of this list, with its origin updated when
  // an override replaced exactly that path.
  Value Child(std::string_view key, YAML::Node child) const;
  Value Element(size_t index) const;
  // The value at `key_path` below this one ("links.1.b": map keys and list indices); a key
  // that is not in the tree gives its deepest ancestor's place under the whole path.
  Value At(std::string_view key_path) const;

  bool IsMap() const { return node_.IsMap(); }
  bool IsSequence() const { return node_.IsSequence(); }
  bool IsScalar() const { return node_.IsScalar(); }
  std::vector<Value> Elements() const;  // of a list; fails when not a list

  // Typed reads; each fails with the expected form, and with its limit when out of range (the
  // ranges are those of stagecraft/sim/limits.h).
  std::string String() const;  // non-empty scalar
  std::string Choice(std::initializer_list<std::string_view> options) const;
  std::string Choice(std::span<const std::string_view> options) const;
  // One of the names of an enumeration's table (enum_names.h), as its value.
  template <class E, size_t N>
  E Enum(const EnumName<E> (&table)[N]) const {
    std::string_view names[N];
    for (size_t i = 0; i < N; ++i) names[i] = table[i].name;
    const std::string chosen = Choice(std::span<const std::string_view>(names));
    size_t i = 0;
    while (table[i].name != chosen) ++i;  // Choice returned one of them
    return table[i].value;
  }
  int64_t Int(int64_t min, int64_t max) const;
  double Double(double min_exclusive, double max_inclusive) const;  // min < x <= max
  // min <= x <= max; `noun` words the error ("expected a fraction from 0 to 1").
  double DoubleIn(double min, double max, std::string_view noun = "a number") const;
  bool Bool() const;
  int64_t Bytes(int64_t min_bytes = 0) const;  // min_bytes .. kMaxValueBytes (1 PiB)
  int64_t DurationNs() const;                  // 0 .. kMaxOpNs (1 h)
  double Bandwidth() const;                    // kMinBandwidthBytesPerS .. kMaxBandwidthBytesPerS
  double Flops() const;                        // kMinPeakFlops .. kMaxPeakFlops
  std::string FilePath() const;                // a path string resolved against origin().dir
  // FilePath(), checked to name a readable file (stagecraft::CheckInputFile); fails at this key
  // with the reason ("is a directory").
  std::string ReadableFilePath() const;

  std::string Describe() const;  // "'text'", "a map", "a list", "nothing"

 private:
  YAML::Node node_;
  std::string path_;
  Origin origin_;
  const std::vector<Override>* overrides_;
};

// A map with only known keys (unknown or duplicate keys fail, naming the known ones).
class Map {
 public:
  Map(const Value& value, std::initializer_list<std::string_view> known);

  const Value& value() const { return value_; }
  bool Has(std::string_view key) const;
  std::optional<Value> Find(std::string_view key) const;
  Value Get(std::string_view key) const;  // fails at the map when missing

 private:
  Value value_;
  std::vector<std::pair<std::string, YAML::Node>> entries_;
};

}  // namespace stagecraft::sim::yaml
