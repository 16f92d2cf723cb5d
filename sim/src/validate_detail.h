// What validate.cpp shares with the scenario's loader and its derived limits
// (scenario_limits.cpp). Internal to sim/src.
#pragma once

#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "stagecraft/schedules/generators.h"
#include "stagecraft/sim/topology.h"
#include "stagecraft/sim/validate.h"

namespace stagecraft::sim::detail {

// The problems found so far.
struct Problems {
  std::vector<ScenarioProblem> list;
  void Add(std::string_view key, std::string message) { list.push_back({std::string(key), std::move(message)}); }
  size_t size() const { return list.size(); }
};

// The generators the pipeline runs, with the parameters each runs with: those it names (files
// and unknown names aside), or under `all` every one that takes its parameters.
std::vector<std::pair<const schedules::GeneratorInfo*, schedules::GeneratorParams>> RunGenerators(
    const PipelineSpec& pipeline);

// "unknown schedule 'NAME' (known: ..., or a .csv schedule file)"; `alone`: the only one named
// (where `all` would also do).
std::string UnknownSchedule(std::string_view name, bool alone);

// The derived limits of a scenario whose parts fit (Validate, after its other checks): the cost
// table of each shape its generators run, then the run's bound from their counts; the first
// problem found, as a problem without a key.
void CheckDerivedLimits(const Scenario& scenario, const Topology& topology, Problems* out);

}  // namespace stagecraft::sim::detail
