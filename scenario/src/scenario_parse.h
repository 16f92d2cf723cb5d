// Parsers of the scenario blocks, shared by scenario.cpp (root, pipeline, training),
// scenario_blocks.cpp (topology, model) and scenario_tree.cpp (the tree they read). Internal to
// scenario/src.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "stagecraft/scenario/scenario.h"
#include "yaml_util.h"

namespace stagecraft::sim::detail {

// A `topology.device: NAME` (or a node group's `device: NAME`) read from the device library: the name and the file the scenario
// loader put in the tree in its place.
struct DeviceInclude {
  std::string name;
  std::string file;
};
// The library file of `topology.device: NAME` (`name_value`): devices/NAME.yaml beside the file
// that names it, then ../devices/, then the source tree's scenarios/devices/; fails at the
// value when the name is not a plain file name or no file is found.
std::string DeviceFile(const yaml::Value& name_value);
// The devices the scenario loader read from the library: `topology.device`'s, and each node
// group's by its index in `topology.groups`.
struct DeviceIncludes {
  std::optional<DeviceInclude> device;
  std::map<int, DeviceInclude> groups;
};
// `includes`: the devices that came from the library (their fields' errors name their files);
// `memory_kernels`: the names a device's memory_kernels may use, sorted (null: any name).
TopologySpec ParseTopology(const yaml::Value& value, const DeviceIncludes& includes,
                           const std::vector<std::string>* memory_kernels);
// pipeline.recompute: none | selective | full, or false (none) / true (full) as before
// (recompute_yaml.cpp).
Recompute ParseRecompute(const yaml::Value& v);
// pipeline.recompute_modules: a list of Megatron-LM's module names, each once.
RecomputeModules ParseRecomputeModules(const yaml::Value& v);
// A device that states its peak by dtype runs at the entry of the scenario's precision; fails at
// `device` (topology.device) when it has none.
void ResolvePeak(const yaml::Value& device, Dtype dtype, DeviceSpec* spec);
// ResolvePeak for every device of `spec` (`topology`: the topology block).
void ResolvePeaks(const yaml::Value& topology, Dtype dtype, TopologySpec* spec);
// `ranks` sizes the per-rank cost lists.
ModelSpec ParseModel(const yaml::Value& value, int ranks);

// A pipeline.schedule entry that names a schedule file (".csv").
bool IsScheduleFile(std::string_view name);

// The scenario's YAML tree as the reader sees it: the file, its topology file pulled in, a
// library device's fields put in place, and the overrides applied.
struct ScenarioTree {
  YAML::Node root;
  std::vector<yaml::Override> overrides;
  std::optional<std::string> topology_file;
  DeviceIncludes devices;
};
ScenarioTree BuildTree(std::string_view file_text, const std::string& path,
                       const std::vector<std::string>& override_texts);

}  // namespace stagecraft::sim::detail
