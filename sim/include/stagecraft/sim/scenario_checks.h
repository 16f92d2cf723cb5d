// The scenario as the simulator loads and validates it: the scenario library's loader and
// Validate (stagecraft/scenario/) with the simulator's own checks, which know the roofline's
// memory-bound kernels (gpt_kernels.h), build the machine's routes (topology.h) and bound what
// the cost models derive (cost_models.h, run_bound.h). Every command that simulates loads here.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "stagecraft/scenario/scenario.h"
#include "stagecraft/scenario/validate.h"
#include "stagecraft/sim/topology.h"

namespace stagecraft::sim {

// The simulator's part of Validate (validate.h EngineChecks), for one scenario at a time: the
// machine it builds is the one its derived limits are checked on.
class SimulatorChecks : public EngineChecks {
 public:
  // MemoryKernelNames() of gpt_kernels.h.
  const std::vector<std::string>* MemoryKernelNames() const override;
  // The routes must join every pair of devices.
  std::string CheckMachine(const TopologySpec& topology) override;
  // The cost table of every shape the scenario's generators run, each derived time and size
  // within its limit, then the whole run's simulated time bounded by kMaxRunNs (run_bound.h);
  // the first problem alone, without a key.
  void CheckDerived(const Scenario& scenario, std::vector<ScenarioProblem>* out) override;

 private:
  std::optional<Topology> machine_;
};

// The loaders of scenario.h, with SimulatorChecks.
Scenario LoadScenario(const std::string& path, const std::vector<std::string>& overrides = {});
Scenario LoadScenarioFromText(std::string_view text, const std::string& path,
                              const std::vector<std::string>& overrides = {});
Scenario LoadScenarioForNewLayout(const std::string& path, const std::vector<std::string>& overrides = {});
Scenario LoadScenarioForNewLayoutFromText(std::string_view text, const std::string& path,
                                         const std::vector<std::string>& overrides = {});

// Validate and CheckScenario of validate.h, with SimulatorChecks.
std::vector<ScenarioProblem> Validate(const Scenario& scenario);
void CheckScenario(const Scenario& scenario);

}  // namespace stagecraft::sim
