// The scenario's YAML tree before it is read: the file, a `topology: FILE` and a library device
// pulled in, the --set overrides applied to it (scenario.h); and ScenarioText, that tree written
// back as one self-contained document.
#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <filesystem>
#include <iterator>
#include <map>
#include <optional>

#include "scenario_parse.h"
#include "stagecraft/base/error.h"
#include "stagecraft/scenario/scenario.h"
#include "yaml_util.h"

namespace stagecraft::sim {
namespace {

using stagecraft::InputError;
using yaml::Origin;
using yaml::Override;
using yaml::Value;

std::vector<std::string> SplitPath(const std::string& path) {
  std::vector<std::string> parts;
  size_t start = 0;
  for (size_t dot = path.find('.'); dot != std::string::npos; dot = path.find('.', start)) {
    parts.push_back(path.substr(start, dot - start));
    start = dot + 1;
  }
  parts.push_back(path.substr(start));
  return parts;
}

// The entry `key` of a map or list node (a reference into the tree), creating an empty map
// under a missing map key. `walked` is the path so far, for errors.
YAML::Node Descend(YAML::Node node, const std::string& key, const std::string& walked, const Override& ov) {
  if (node.IsNull()) node = YAML::Node(YAML::NodeType::Map);
  if (node.IsMap()) {
    for (auto it = node.begin(); it != node.end(); ++it) {
      if (it->first.IsScalar() && it->first.Scalar() == key) return it->second;
    }
    node[key] = YAML::Node(YAML::NodeType::Map);
    return node[key];
  }
  if (node.IsSequence()) {
    size_t index = 0;
    const auto [end, ec] = std::from_chars(key.data(), key.data() + key.size(), index);
    if (node.size() == 0) throw InputError(fmt::format("--set {}: '{}' is an empty list", ov.text, walked));
    if (ec != std::errc() || end != key.data() + key.size() || index >= node.size()) {
      throw InputError(fmt::format("--set {}: '{}' is a list of {} entries; expected an index 0..{}, got '{}'", ov.text,
                                   walked, node.size(), node.size() - 1, key));
    }
    return node[index];
  }
  throw InputError(fmt::format("--set {}: '{}' is a single value, not a map", ov.text, walked));
}

// Replaces `parent[key]` (`name`, which names `file`) by the parsed file; returns the file's
// path. A file that cannot be read fails at the key; an error inside it names the file.
std::string IncludeFile(YAML::Node parent, const std::string& key, const Value& name, const std::string& file,
                        std::string_view what) {
  std::string text;
  try {
    text = yaml::ReadFile(file, what);
  } catch (const InputError& e) {
    name.Fail(e.what());
  }
  parent[key] = yaml::LoadText(text, file);
  return file;
}

// A `topology: FILE`, relative to the file that names it.
std::string IncludeFile(YAML::Node parent, const std::string& key, const Value& name) {
  return IncludeFile(parent, key, name, name.FilePath(), "a topology file");
}

// Applies one override to the tree. A whole new `topology: FILE` is included at once, relative
// to the current directory, and recorded in `topology_file`.
void ApplyOverride(YAML::Node root, const std::vector<Override>& overrides, int index,
                   std::optional<std::string>* topology_file) {
  const Override& ov = overrides[index];
  const std::vector<std::string> parts = SplitPath(ov.path);
  YAML::Node node = root;
  std::string walked;
  for (size_t i = 0; i + 1 < parts.size(); ++i) {
    node.reset(Descend(node, parts[i], walked, ov));
    walked += (walked.empty() ? "" : ".") + parts[i];
  }
  const std::string& last = parts.back();
  if (node.IsSequence()) {
    Descend(node, last, walked, ov) = ov.value;
  } else if (node.IsMap() || node.IsNull()) {
    node[last] = ov.value;
  } else {
    throw InputError(fmt::format("--set {}: '{}' is a single value, not a map", ov.text, walked));
  }
  if (ov.path == "topology") {
    topology_file->reset();
    if (ov.value.IsScalar()) {
      const Value name(ov.value, "topology", Origin{"", "", index, true}, &overrides);
      *topology_file = IncludeFile(root, "topology", name);
    }
  }
}

// Replaces a `topology.device: NAME` in the tree by its library file's fields, so that --set
// can reach into them (topology.device.memory_bandwidth=...); `name` is located at `origin`.
void IncludeDevice(YAML::Node root, const Origin& origin, const std::vector<Override>* overrides,
                   std::optional<detail::DeviceInclude>* device) {
  if (!root.IsMap() || !root["topology"] || !root["topology"].IsMap()) return;
  YAML::Node topology = root["topology"];
  if (!topology["device"] || !topology["device"].IsScalar()) return;
  const Value name(topology["device"], "topology.device", origin, overrides);
  const std::string library_name = name.String();  // before the node is replaced by the file's
  const std::string file = IncludeFile(topology, "device", name, detail::DeviceFile(name), "a device file");
  *device = detail::DeviceInclude{library_name, file};
}

// Replaces each node group's `device: NAME` still a name (topology.groups.N.device) by its
// library file's fields, as IncludeDevice does; `name` is located at `origin`.
void IncludeGroupDevices(YAML::Node root, const Origin& origin, const std::vector<Override>* overrides,
                         std::map<int, detail::DeviceInclude>* devices) {
  if (!root.IsMap() || !root["topology"] || !root["topology"].IsMap()) return;
  YAML::Node groups = root["topology"]["groups"];
  if (!groups || !groups.IsSequence()) return;
  for (size_t g = 0; g < groups.size(); ++g) {
    YAML::Node group = groups[g];
    if (!group.IsMap() || !group["device"] || !group["device"].IsScalar()) continue;
    const Value name(group["device"], fmt::format("topology.groups.{}.device", g), origin, overrides);
    const std::string library_name = name.String();
    const std::string file = IncludeFile(group, "device", name, detail::DeviceFile(name), "a device file");
    (*devices)[static_cast<int>(g)] = detail::DeviceInclude{library_name, file};
  }
}

// Whether override `path` puts a node group's device in place whole (or the groups, or the
// topology); `group` is set to the group it names, -1 for all of them.
bool ReplacesGroupDevice(const std::string& path, int* group) {
  *group = -1;
  if (path == "topology" || path == "topology.groups") return true;
  constexpr std::string_view kPrefix = "topology.groups.";
  if (!path.starts_with(kPrefix)) return false;
  const std::string_view rest = std::string_view(path).substr(kPrefix.size());
  int index = 0;
  const auto [end, ec] = std::from_chars(rest.data(), rest.data() + rest.size(), index);
  if (ec != std::errc()) return false;
  const std::string_view tail(end, static_cast<size_t>(rest.data() + rest.size() - end));
  if (!tail.empty() && tail != ".device") return false;
  *group = index;
  return true;
}

}  // namespace

namespace detail {

bool IsScheduleFile(std::string_view name) { return name.size() > 4 && name.substr(name.size() - 4) == ".csv"; }

ScenarioTree BuildTree(std::string_view file_text, const std::string& path,
                       const std::vector<std::string>& override_texts) {
  ScenarioTree tree;
  YAML::Node& root = tree.root;
  root = yaml::LoadText(file_text, path);
  std::vector<Override>& overrides = tree.overrides;
  for (const std::string& text : override_texts) overrides.push_back(yaml::ParseOverride(text));

  const Origin file_origin{path, yaml::DirOf(path), -1, false};
  // `topology: FILE` is read before the overrides so that --set can reach into it, unless the
  // first override that touches the topology replaces it whole.
  bool replaced_first = false;
  for (const Override& ov : overrides) {
    if (ov.path == "topology" || ov.path.rfind("topology.", 0) == 0) {
      replaced_first = ov.path == "topology";
      break;
    }
  }
  std::optional<std::string>& topology_file = tree.topology_file;
  std::optional<detail::DeviceInclude>& device = tree.devices.device;
  std::map<int, detail::DeviceInclude>& group_devices = tree.devices.groups;
  if (root.IsMap()) {
    const Value top(root, "", file_origin, nullptr);
    for (auto it = root.begin(); it != root.end() && !replaced_first; ++it) {
      if (it->first.IsScalar() && it->first.Scalar() == "topology" && it->second.IsScalar()) {
        topology_file = IncludeFile(root, "topology", top.Child("topology", it->second));
        break;
      }
    }
    // A library device named where the overrides can reach into it: in the scenario or its
    // topology file, unless the first override that touches the device replaces it whole.
    bool device_replaced_first = replaced_first;
    for (const Override& ov : overrides) {
      if (ov.path == "topology" || ov.path == "topology.device" || ov.path.rfind("topology.device.", 0) == 0) {
        device_replaced_first = ov.path != "topology.device" ? ov.path == "topology" : ov.value.IsScalar();
        break;
      }
    }
    const Origin named_at =
        topology_file ? Origin{*topology_file, yaml::DirOf(*topology_file), -1, false} : file_origin;
    if (!device_replaced_first) IncludeDevice(root, named_at, nullptr, &device);
    // The groups' devices likewise, unless the first override that touches one replaces it whole.
    bool groups_replaced_first = replaced_first;
    for (const Override& ov : overrides) {
      int group = -1;
      if (ov.path.starts_with("topology.groups") || ov.path == "topology") {
        groups_replaced_first = ReplacesGroupDevice(ov.path, &group);
        break;
      }
    }
    if (!groups_replaced_first) IncludeGroupDevices(root, named_at, nullptr, &group_devices);
    for (size_t i = 0; i < overrides.size(); ++i) {
      ApplyOverride(root, overrides, static_cast<int>(i), &topology_file);
      const std::string& key = overrides[i].path;
      if (int group = -1; ReplacesGroupDevice(key, &group)) {
        if (group < 0) group_devices.clear();
        group_devices.erase(group);
        const Origin origin = key == "topology" && topology_file
                                  ? Origin{*topology_file, yaml::DirOf(*topology_file), static_cast<int>(i), false}
                                  : Origin{"", "", static_cast<int>(i), true};
        IncludeGroupDevices(root, origin, &overrides, &group_devices);
      }
      if (key != "topology" && key != "topology.device") continue;
      // A device or topology put in place whole is no longer the library file's; a device it
      // names is read now, so that the overrides after it reach into its fields.
      device.reset();
      const Origin origin = key == "topology.device" || !topology_file
                                ? Origin{"", "", static_cast<int>(i), true}
                                : Origin{*topology_file, yaml::DirOf(*topology_file), static_cast<int>(i), false};
      IncludeDevice(root, origin, &overrides, &device);
    }
  }
  return tree;
}

}  // namespace detail

namespace {

using detail::IsScheduleFile;

// The keys that name files, resolved against `dir` ("" = the current directory) when relative.
constexpr std::string_view kFileKeys[] = {"model.profile", "training.data"};

std::string Absolute(const std::string& name, const std::string& dir) {
  std::filesystem::path file(name);
  if (file.is_relative() && !dir.empty()) file = std::filesystem::path(dir) / file;
  return std::filesystem::absolute(file).lexically_normal().string();
}

// Makes a file name at `key` of the tree (a schedule list's .csv entries included) absolute.
void MakeAbsolute(YAML::Node root, std::string_view key, const std::string& dir) {
  if (!root.IsMap()) return;
  const size_t dot = key.find('.');
  YAML::Node block = root[std::string(key.substr(0, dot))];
  if (!block.IsMap()) return;
  YAML::Node value = block[std::string(key.substr(dot + 1))];
  if (value.IsScalar() && !value.Scalar().empty()) {
    if (key != "pipeline.schedule" || IsScheduleFile(value.Scalar())) value = Absolute(value.Scalar(), dir);
  } else if (value.IsSequence()) {
    for (YAML::Node entry : value) {
      if (entry.IsScalar() && IsScheduleFile(entry.Scalar())) entry = Absolute(entry.Scalar(), dir);
    }
  }
}

}  // namespace

std::string ScenarioText(const std::string& path, const std::vector<std::string>& overrides) {
  const std::string text = yaml::ReadFile(path, "a scenario file");
  // The file's names are relative to its directory, an override's to the current one: each is
  // made absolute where it stands, before the tree is put together.
  YAML::Node file = yaml::LoadText(text, path);
  for (const std::string_view key : kFileKeys) MakeAbsolute(file, key, yaml::DirOf(path));
  MakeAbsolute(file, "pipeline.schedule", yaml::DirOf(path));
  if (file.IsMap() && file["topology"].IsScalar()) file["topology"] = Absolute(file["topology"].Scalar(), yaml::DirOf(path));
  std::vector<std::string> resolved;
  for (const std::string& o : overrides) {
    Override ov = yaml::ParseOverride(o);
    const bool names_file = std::find(std::begin(kFileKeys), std::end(kFileKeys), ov.path) != std::end(kFileKeys) ||
                            ov.path == "pipeline.schedule";
    if (!names_file) {
      resolved.push_back(o);
      continue;
    }
    YAML::Node holder(YAML::NodeType::Map);
    const size_t dot = ov.path.find('.');
    holder[ov.path.substr(0, dot)][ov.path.substr(dot + 1)] = ov.value;
    MakeAbsolute(holder, ov.path, "");
    YAML::Emitter value;
    value << YAML::Flow << holder[ov.path.substr(0, dot)][ov.path.substr(dot + 1)];
    resolved.push_back(ov.path + "=" + value.c_str());
  }
  YAML::Emitter emitted;
  emitted << file;
  const detail::ScenarioTree tree = detail::BuildTree(emitted.c_str(), path, resolved);
  YAML::Emitter out;
  out << tree.root;
  return std::string(out.c_str()) + "\n";
}


}  // namespace stagecraft::sim
