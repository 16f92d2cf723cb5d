// `stagecraft profile`: placeholder.
#include "commands.h"
namespace stagecraft::cli {
Command AddProfileCommand(CLI::App& root) {
  CLI::App* app = root.add_subcommand("profile", "Measure per-layer costs on this machine");
  return {app, [] { return 2; }};
}
}  // namespace stagecraft::cli
