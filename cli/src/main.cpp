// `stagecraft`: a thin dispatcher; errors are caught here once and printed as one line.
#include <cstdio>
#include <exception>
#include <string>

#include "commands.h"
#include "stagecraft/base/error.h"
#include "stagecraft/schedules/ir.h"

int main(int argc, char** argv) {
  using namespace stagecraft;
  CLI::App app{"stagecraft: compare pipeline-parallel training schedules"};
  app.require_subcommand(1);
  app.set_version_flag("--version", "stagecraft 0.1.0");
  std::vector<cli::Command> commands;
  commands.push_back(cli::AddScheduleCommand(app));
#ifdef STAGECRAFT_HAVE_SIM
  commands.push_back(cli::AddSimulateCommand(app));
  commands.push_back(cli::AddCompareCommand(app));
#endif
#ifdef STAGECRAFT_HAVE_EXEC
  commands.push_back(cli::AddExecuteCommand(app));
  commands.push_back(cli::AddProfileCommand(app));
#endif
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    std::fprintf(stderr, "stagecraft: error: %s (see --help)\n", e.what());
    return 2;
  }
  try {
    for (auto& command : commands) {
      if (command.app->parsed()) return command.run();
    }
  } catch (const stagecraft::InputError& e) {
    std::fprintf(stderr, "stagecraft: error: %s\n", e.what());
    return 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "stagecraft: error: %s\n", e.what());
    return 1;
  }
  return 2;
}
