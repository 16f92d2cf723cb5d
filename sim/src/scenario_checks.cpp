// The simulator's checks of a scenario (scenario_checks.h) and the loaders that run them.
#include "stagecraft/sim/scenario_checks.h"

#include "scenario_limits.h"
#include "stagecraft/base/error.h"
#include "stagecraft/sim/gpt_kernels.h"

namespace stagecraft::sim {

const std::vector<std::string>* SimulatorChecks::MemoryKernelNames() const { return &sim::MemoryKernelNames(); }

std::string SimulatorChecks::CheckMachine(const TopologySpec& topology) {
  machine_.reset();
  try {
    machine_.emplace(topology);
  } catch (const InputError& e) {
    return e.what();
  }
  return "";
}

void SimulatorChecks::CheckDerived(const Scenario& scenario, std::vector<ScenarioProblem>* out) {
  if (machine_) detail::CheckDerivedLimits(scenario, *machine_, out);
}

// Each call checks with a SimulatorChecks of its own: the machine it builds is that scenario's.
Scenario LoadScenario(const std::string& path, const std::vector<std::string>& overrides) {
  SimulatorChecks checks;
  return LoadScenario(path, overrides, checks);
}

Scenario LoadScenarioForNewLayout(const std::string& path, const std::vector<std::string>& overrides) {
  SimulatorChecks checks;
  return LoadScenarioForNewLayout(path, overrides, checks);
}

std::vector<ScenarioProblem> Validate(const Scenario& scenario) {
  SimulatorChecks checks;
  return Validate(scenario, checks);
}

Scenario LoadScenarioFromText(std::string_view text, const std::string& path,
                              const std::vector<std::string>& overrides) {
  SimulatorChecks checks;
  return LoadScenarioFromText(text, path, overrides, checks);
}

void CheckScenario(const Scenario& scenario) {
  SimulatorChecks checks;
  CheckScenario(scenario, checks);
}

Scenario LoadScenarioForNewLayoutFromText(std::string_view text, const std::string& path,
                                         const std::vector<std::string>& overrides) {
  SimulatorChecks checks;
  return LoadScenarioForNewLayoutFromText(text, path, overrides, checks);
}

}  // namespace stagecraft::sim
