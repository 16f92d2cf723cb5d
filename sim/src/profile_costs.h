// What the profile's reader and its cost table share with costs.cpp (see costs.h for the
// format and the rules). Internal to sim/src.
#pragma once

#include <string>
#include <vector>

#include "stagecraft/schedules/ir.h"
#include "stagecraft/sim/costs.h"
#include "stagecraft/sim/profile.h"
#include "stagecraft/sim/scenario.h"

namespace stagecraft::sim::detail {

// Reads the profile at `path` (at most kMaxYamlBytes); with `scenario`, also checks that it fits.
Profile ReadProfile(const std::string& path, const Scenario* scenario);

// The profile's layers per stage under pipeline.partition.
std::vector<int> ProfileStageLayers(const Scenario& sc, const Profile& p, int stages);

// The cost table of `p` for `shape` (CostsFromProfile).
CostTable ProfileTable(const Scenario& sc, const Profile& p, const schedules::Shape& shape, bool per_microbatch,
                       bool calibrated);

}  // namespace stagecraft::sim::detail
