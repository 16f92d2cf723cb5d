// What `simulate` and `execute` share: which schedules a scenario asks for (generated, lowered
// and validated) and where each schedule's trace goes.
#pragma once

#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "stagecraft/base/error.h"
#include "stagecraft/exec/backend.h"
#include "stagecraft/schedules/ir.h"
#include "stagecraft/schedules/metrics.h"
#include "stagecraft/schedules/run_record.h"
#include "stagecraft/sim/scenario.h"
#include "stagecraft/sim/topology.h"

namespace stagecraft::cli {

// The whole of a file the user named; throws InputError "PATH: cannot open file".
std::string ReadTextFile(const std::string& path);

// The scenario's schedules, lowered and validated: the listed ones (LoadScenario has checked
// them; a schedule file is imported as scenario.h says), or under "all" every generator the shape allows, with the others named on stderr
// when `report_skipped`.
std::vector<schedules::Schedule> ScenarioSchedules(const sim::PipelineSpec& pipeline, bool report_skipped);

// The simulator's prediction of one of the scenario's schedules on its topology, with its
// device memory (simulate prints it; execute refuses a schedule predicted not to fit).
struct Prediction {
  schedules::Schedule schedule;
  schedules::RunRecord result;
  schedules::ScheduleMetrics metrics;
  std::string cost_source;
};
Prediction Predict(const sim::Scenario& scenario, const sim::Topology& topology, schedules::Schedule schedule);

// Throws InputError when the simulator predicts that a schedule of `predictions` exceeds the
// scenario's device memory, naming each such schedule with every rank's predicted peak.
void RefusePredictedOom(const sim::Scenario& scenario, const std::vector<Prediction>& predictions);

// For commands under mpirun: bad input is found by every rank alike before any work. Rank 0
// prints the one line, then every rank waits at a barrier so that no rank exits (and has
// mpirun tear the job down) before the cause is out. Returns the exit code, 1.
int ReportInputErrorOnce(const stagecraft::InputError& error);

// `--backend cpu|cuda|auto` (default cpu) on a command that runs the executor.
void AddBackendOption(CLI::App* app, std::string* flag);
// The backend `flag` names, with the scenario's dtype checked for it (throws InputError, found
// by every rank alike).
exec::Backend BackendFor(const std::string& flag, const sim::Scenario& scenario);
// This process's device and transport; a failure to make them (a CUDA error) is printed with
// the rank and host, and ends the job.
exec::ProcessRuntime StartRuntime(exec::Backend backend, const sim::Scenario& scenario,
                                  std::chrono::nanoseconds deadline = exec::kDefaultWaitDeadline);

// `path` itself for one schedule; "<stem>.<schedule><ext>" when there are several, with any
// character of the schedule's name but letters, digits, '-', '_' and '.' written as '_'.
std::string TracePath(const std::string& path, const std::string& schedule, bool several);

}  // namespace stagecraft::cli
