// The derived limits of a scenario whose parts fit (scenario_limits.cpp), which the simulator's
// checks run last (scenario_checks.h). Internal to sim/src.
#pragma once

#include <vector>

#include "stagecraft/scenario/scenario.h"
#include "stagecraft/scenario/validate.h"
#include "stagecraft/sim/topology.h"

namespace stagecraft::sim::detail {

// The cost table of each shape the scenario's generators run, then the run's bound from their
// counts, on `topology`; the first problem found, appended as a problem without a key.
void CheckDerivedLimits(const Scenario& scenario, const Topology& topology, std::vector<ScenarioProblem>* out);

}  // namespace stagecraft::sim::detail
