// The subcommand table of the `stagecraft` dispatcher: each subcommand registers its flags
// on a CLI11 sub-app and returns the function that runs it.
#pragma once

#include <functional>
#include <vector>

#include <CLI/CLI.hpp>

#include "stagecraft/base/error.h"

namespace stagecraft::cli {

struct Command {
  CLI::App* app;
  std::function<int()> run;  // returns the exit code; throws InputError on bad input
};

// Thrown by a command whose failure is already printed (under mpirun: by the rank that speaks
// for the job): the dispatcher prints nothing more and exits with `exit_code`, after the
// command's scope has closed (its MPI session finalized).
struct Reported {
  int exit_code = 1;
};

Command AddScheduleCommand(CLI::App& root);
#ifdef STAGECRAFT_HAVE_SIM
Command AddSimulateCommand(CLI::App& root);
Command AddCompareCommand(CLI::App& root);
Command AddReplayCommand(CLI::App& root);
Command AddSearchCommand(CLI::App& root);
Command AddPlanCommand(CLI::App& root);
#endif
#ifdef STAGECRAFT_HAVE_EXEC
Command AddExecuteCommand(CLI::App& root);
Command AddProfileCommand(CLI::App& root);
Command AddDevicesCommand(CLI::App& root);
#endif

}  // namespace stagecraft::cli
