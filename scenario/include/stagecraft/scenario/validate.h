// How the parts of a scenario fit together (DESIGN.md §3): every check that ties one value to
// another (ranks vs devices, layers vs stages, the schedules' parameters, per-rank cost lists,
// the topology's links, a profile vs the pipeline) and then, through an engine's checks, the
// limits on what the cost models derive. A scenario built in code gets the same diagnostics as
// one read from YAML.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "stagecraft/base/error.h"
#include "stagecraft/scenario/scenario.h"
#include "stagecraft/schedules/generators.h"

namespace stagecraft::sim {

// One problem: the key path it is about and what is wrong with it.
struct ScenarioProblem {
  // "pipeline.ranks", "model.costs.forward", "topology.links.1.b"; "" for a problem of the
  // scenario as a whole (a derived limit), whose message names the scenario itself.
  std::string key;
  std::string message;  // "topology has 4 devices but pipeline.ranks is 16"
};

// What an engine adds to a scenario's checks, run by Validate and the loader at their places in
// the order below. The simulator's (sim/scenario_checks.h) builds the machine's routes and
// bounds what its cost models derive; this base adds nothing, which is what a library below the
// engines (the executor) can check without them.
class EngineChecks {
 public:
  virtual ~EngineChecks() = default;
  // The kernel names a device's memory_kernels may use, sorted; null: any name.
  virtual const std::vector<std::string>* MemoryKernelNames() const { return nullptr; }
  // After the topology's own facts fit: the machine built from them; "" when it can be built,
  // else why not (reported at `topology`).
  virtual std::string CheckMachine(const TopologySpec& topology) { return ""; }
  // When no other problem was found: the limits on what the engine derives from the scenario,
  // appended to `out`.
  virtual void CheckDerived(const Scenario& scenario, std::vector<ScenarioProblem>* out) {}
};

// Every problem found, in the order: counts out of range (values built in code; the loader
// checks each as it reads it), the topology (then checks.CheckMachine), ranks vs devices, the
// pipeline's stages and schedules, the model (one of transformer, mlp, costs or profile; heads
// divide hidden; one explicit cost per rank; a layer per stage of every schedule run; a profile
// measured at pipeline.microbatch_size, with the model's layers). When there are none:
// checks.CheckDerived (the simulator's: the costs of every schedule run, each derived time and
// size within its limit, and the whole run's simulated time bounded by kMaxRunNs).
std::vector<ScenarioProblem> Validate(const Scenario& scenario, EngineChecks& checks);

// "PATH: key: message" per problem ("key: message" for a scenario without a path; a problem
// without a key as its message says), joined by "; ".
std::string DescribeProblems(const Scenario& scenario, const std::vector<ScenarioProblem>& problems);

// Throws InputError(DescribeProblems(...)) when Validate finds any problem.
void CheckScenario(const Scenario& scenario, EngineChecks& checks);

// Why the model cannot split each sequence over `c` devices (pipeline.context_parallel), "" when
// it can: a transformer with attention: flash whose seq cuts into 2c equal chunks (each device
// takes one from each end, the causal load balance). What Validate checks of the scenario's C
// and what plan checks of each C it tries.
std::string ContextParallelProblem(const Scenario& scenario, int c);

// The most model.transformer.moe.load_imbalance can be with `expert_parallel` devices in an expert
// group: E x min(top_k, experts / E) / top_k (every copy its local experts can take, from each
// device of its group); 1 without expert parallelism (a device computes its own tokens' rows).
double MostLoadImbalance(const MoeSpec& moe, int expert_parallel);

// What a user runs (simulate, execute): training.pipemare with a pipeline.schedule that does not
// run pipemare is refused (InputError, "PATH: training.pipemare: ..."). Not part of Validate: a
// replay, a plan or a calibration narrows a scenario to one schedule of those it runs.
void CheckPipeMareRuns(const Scenario& scenario);

// The generators the pipeline runs, with the parameters each runs with: those it names (files
// and unknown names aside), or under `all` every one that takes its parameters.
std::vector<std::pair<const schedules::GeneratorInfo*, schedules::GeneratorParams>> RunGenerators(
    const PipelineSpec& pipeline);

}  // namespace stagecraft::sim
