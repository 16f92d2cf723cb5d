// What the commands share beyond the harness: their common flags (the scenario and --set,
// --max-ops, --backend), the start of the executor's runtime, one error line per job under
// mpirun, where each schedule's trace goes, and where the report goes.
#pragma once

#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "commands.h"
#include "stagecraft/base/error.h"
#include "stagecraft/base/output_file.h"
#include "stagecraft/exec/backend.h"
#include "stagecraft/harness/predict.h"
#include "stagecraft/harness/trace_path.h"
#include "stagecraft/schedules/ir.h"
#include "stagecraft/schedules/metrics.h"
#include "stagecraft/schedules/run_record.h"
#include "stagecraft/scenario/scenario.h"
#include "stagecraft/sim/topology.h"

namespace stagecraft::cli {

// For commands under mpirun: every rank plans on its own (reads the scenario, checks the inputs
// and the output paths) and calls this with its error, empty when it has none. A rank may fail
// where another does not (a file that only one node has). The errors are gathered on rank 0,
// which prints the first once, naming the rank when the ranks disagree; every rank returns
// true when any failed (the command then exits 1 on every rank, after the line is out).
bool AnyRankFailed(const std::string& error);

// The required `scenario` positional (`help` says what it must hold) and `--set KEY=VALUE`
// (repeatable; `example` is one) of a command that reads a scenario.
void AddScenarioOptions(CLI::App* app, std::string* scenario, std::vector<std::string>* sets,
                        const std::string& help = "Scenario YAML",
                        const std::string& example = "pipeline.microbatches=32");

// `--max-ops N` (default schedules::kDefaultMaxOps) on a command that builds schedules.
void AddMaxOpsOption(CLI::App* app, int64_t* max_ops);

// `--backend cpu|cuda|auto` (default cpu) on a command that runs the executor.
void AddBackendOption(CLI::App* app, std::string* flag);
// The backend `flag` names, with the scenario's dtype checked for it (throws InputError, found
// by every rank alike).
exec::Backend BackendFor(const std::string& flag, const sim::Scenario& scenario);
// This process's device and transport (collective: exec::MakeProcessRuntime). When start-up
// fails on any rank, the cause is printed once for the job, as one `stagecraft: error:` line
// per distinct cause naming the ranks and hosts, and every rank throws Reported{1} (the
// dispatcher exits 1 after MPI_Finalize); a rank whose peers hang in start-up prints its cause
// and ends the job.
//
// Test hook: STAGECRAFT_FAIL_STARTUP_ON_RANK=RANK[:device|transport[:throw|hang]]
// (kStartupFaultVariable) makes that rank's step throw, as a GPU or NCCL that fails on one rank
// alone would, or hang (its peers then give up after the deadline and end the job).
inline constexpr const char* kStartupFaultVariable = "STAGECRAFT_FAIL_STARTUP_ON_RANK";
// `data_parallel` replicas (execute: pipeline.data_parallel) split the job (exec::WorldLayout).
exec::ProcessRuntime StartRuntime(exec::Backend backend, const sim::Scenario& scenario,
                                  std::chrono::nanoseconds deadline = exec::kDefaultWaitDeadline,
                                  int data_parallel = 1);

// Each schedule's trace file when there are several (harness/trace_path.h).
using harness::TracePath;

// Adds the trace of every schedule in `names` to `outputs` (TracePath of `path`), checking each
// now; returns their handles, in the order of `names`. A stream (`-`, a FIFO, a device) takes
// the trace of one schedule only: with several, throws InputError asking for a file name.
// Errors name `flag`, the option that gave `path` (replay's is --trace-out).
std::vector<int> AddTraceOutputs(stagecraft::OutputSet& outputs, const std::string& path,
                                 const std::vector<std::string>& names, const std::string& flag = "--trace");

// A prediction's outputs (simulate's, replay's): the metrics file into `json` (-1: none), with
// `costs` as its cost source, and each schedule's trace into `traces` (AddTraceOutputs).
void SetPredictedOutputs(OutputSet& outputs, int json, const std::vector<int>& traces, const sim::Scenario& scenario,
                         const std::string& costs, const std::vector<harness::Prediction>& predictions);

// Writes a command's report (its table, its summary) to standard output, or to standard error
// when one of `outputs` has standard output.
void WriteReport(const OutputSet& outputs, const std::string& report);

// Throws InputError "PATH: tasks: COMMAND runs one model; ..." for a multi-model workload
// (scenario tasks:), which only simulate runs.
void RefuseWorkload(const sim::Scenario& scenario, std::string_view command);

}  // namespace stagecraft::cli
