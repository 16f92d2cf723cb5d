// Parsers of the scenario blocks, shared by scenario.cpp (root, pipeline, training) and
// scenario_blocks.cpp (topology, model). Internal to sim/src.
#pragma once

#include "stagecraft/sim/scenario.h"
#include "yaml_util.h"

namespace stagecraft::sim::detail {

// A `topology.device: NAME` read from the device library: the name and the file the scenario
// loader put in the tree in its place.
struct DeviceInclude {
  std::string name;
  std::string file;
};
// The library file of `topology.device: NAME` (`name_value`): devices/NAME.yaml beside the file
// that names it, then ../devices/, then the source tree's scenarios/devices/; fails at the
// value when the name is not a plain file name or no file is found.
std::string DeviceFile(const yaml::Value& name_value);
// `device`: set when the device came from the library (its fields' errors name its file).
TopologySpec ParseTopology(const yaml::Value& value, const DeviceInclude* device = nullptr);
// A device that states its peak by dtype runs at the entry of the scenario's precision; fails at
// `device` (topology.device) when it has none.
void ResolvePeak(const yaml::Value& device, Dtype dtype, DeviceSpec* spec);
// `ranks` sizes the per-rank cost lists.
ModelSpec ParseModel(const yaml::Value& value, int ranks);

}  // namespace stagecraft::sim::detail
