// `stagecraft`: a thin dispatcher; errors are caught here once and printed as one line.
#include <algorithm>
#include <cstdio>
#include <exception>
#include <string>
#include <vector>

#include "commands.h"
#include "stagecraft/base/error.h"
#include "stagecraft/base/printable.h"
#include "stagecraft/base/spelling.h"
#include "stagecraft/schedules/ir.h"

namespace {

// The one line of a failed command; user text inside the message is escaped (Printable).
int PrintError(const char* what, const char* hint, int code) {
  std::fprintf(stderr, "stagecraft: error: %s%s\n", stagecraft::Printable(what).c_str(), hint);
  return code;
}

// A first argument that is neither an option nor a command: CLI11 would call it a missing
// subcommand. Empty when argv names a command (or starts with an option).
std::string UnknownCommand(const CLI::App& app, int argc, char** argv) {
  if (argc < 2 || argv[1][0] == '-') return "";
  std::string known;
  for (const CLI::App* sub : app.get_subcommands({})) {
    if (sub->get_name() == argv[1]) return "";
    known += (known.empty() ? "" : ", ") + sub->get_name();
  }
  return "unknown command '" + std::string(argv[1]) + "' (commands: " + known + ")";
}

// The first argument the parsed command did not take ("unknown option '--gpu' (did you mean
// --gpus?)"), empty when it took them all. CLI11 checks required options before it reports
// arguments it did not expect, so a misspelt required flag would read as a missing one.
std::string UnexpectedArgument(const CLI::App& app) {
  const CLI::App* command = &app;
  for (const CLI::App* sub : app.get_subcommands({})) {
    if (sub->parsed()) command = sub;
  }
  const std::vector<std::string> left = command->remaining();
  if (left.empty()) return "";
  const std::string& first = left.front();
  const std::string who = command == &app ? "" : command->get_name() + ": ";
  if (first.size() < 2 || first[0] != '-') return who + "unexpected argument '" + first + "'";
  const std::string flag = first.substr(0, first.find('='));
  std::vector<std::string> names;
  for (const CLI::Option* option : command->get_options()) {
    for (const std::string& name : option->get_lnames()) names.push_back("--" + name);
  }
  const std::vector<std::string_view> known(names.begin(), names.end());
  const std::string nearest = stagecraft::NearestName(flag, known);
  return who + "unknown option '" + flag + "'" + (nearest.empty() ? "" : " (did you mean " + nearest + "?)");
}

}  // namespace

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
  commands.push_back(cli::AddReplayCommand(app));
  commands.push_back(cli::AddSearchCommand(app));
  commands.push_back(cli::AddPlanCommand(app));
#endif
#ifdef STAGECRAFT_HAVE_EXEC
  commands.push_back(cli::AddExecuteCommand(app));
  commands.push_back(cli::AddProfileCommand(app));
  commands.push_back(cli::AddDevicesCommand(app));
#endif
  if (const std::string unknown = UnknownCommand(app, argc, argv); !unknown.empty()) {
    return PrintError(unknown.c_str(), " (see --help)", 2);
  }
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    const std::string unexpected = UnexpectedArgument(app);
    return PrintError(unexpected.empty() ? e.what() : unexpected.c_str(), " (see --help)", 2);
  }
  try {
    for (auto& command : commands) {
      if (command.app->parsed()) return command.run();
    }
  } catch (const cli::Reported& reported) {  // the command has printed its failure
    return reported.exit_code;
  } catch (const std::exception& e) {  // InputError and any other failure: one line, exit 1
    return PrintError(e.what(), "", 1);
  }
  return 2;
}
