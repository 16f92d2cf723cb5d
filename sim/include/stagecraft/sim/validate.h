// How the parts of a scenario fit together (DESIGN.md §3): every check that ties one value to
// another (ranks vs devices, layers vs stages, the schedules' parameters, per-rank cost lists,
// the topology's links, a profile vs the pipeline) and then the limits on what the cost models
// derive. A scenario built in code gets the same diagnostics as one read from YAML.
#pragma once

#include <string>
#include <vector>

#include "stagecraft/base/error.h"
#include "stagecraft/sim/scenario.h"

namespace stagecraft::sim {

// One problem: the key path it is about and what is wrong with it.
struct ScenarioProblem {
  // "pipeline.ranks", "model.costs.forward", "topology.links.1.b"; "" for a problem of the
  // scenario as a whole (a derived limit), whose message names the scenario itself.
  std::string key;
  std::string message;  // "topology has 4 devices but pipeline.ranks is 16"
};

// Every problem found, in the order: counts out of range (values built in code; the loader
// checks each as it reads it), the topology, ranks vs devices, the pipeline's stages and
// schedules, the model (one of transformer, mlp, costs or profile; heads divide hidden; one
// explicit cost per rank; a layer per stage of every schedule run; a profile measured at
// pipeline.microbatch_size, with the model's layers). When there are none: the costs of every
// schedule run, each derived time and size within its limit (cost_models.h), and the whole
// run's simulated time bounded by kMaxRunNs (run_bound.h); the first such problem alone.
std::vector<ScenarioProblem> Validate(const Scenario& scenario);

// "PATH: key: message" per problem ("key: message" for a scenario without a path; a problem
// without a key as its message says), joined by "; ".
std::string DescribeProblems(const Scenario& scenario, const std::vector<ScenarioProblem>& problems);

// Throws InputError(DescribeProblems(...)) when Validate finds any problem.
void CheckScenario(const Scenario& scenario);

}  // namespace stagecraft::sim
