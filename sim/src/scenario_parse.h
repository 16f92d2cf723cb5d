// Parsers of the scenario blocks, shared by scenario.cpp (root, pipeline, training) and
// scenario_blocks.cpp (topology, model). Internal to sim/src.
#pragma once

#include "stagecraft/sim/scenario.h"
#include "yaml_util.h"

namespace stagecraft::sim::detail {

TopologySpec ParseTopology(const yaml::Value& value);
// A device that states its peak by dtype runs at the entry of the scenario's precision; fails at
// `device` (topology.device) when it has none.
void ResolvePeak(const yaml::Value& device, Dtype dtype, DeviceSpec* spec);
// `ranks` sizes the per-rank cost lists.
ModelSpec ParseModel(const yaml::Value& value, int ranks);

}  // namespace stagecraft::sim::detail
