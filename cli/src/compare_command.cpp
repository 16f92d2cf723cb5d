// `stagecraft compare`: placeholder until the compare command lands.
#include "commands.h"

namespace stagecraft::cli {
Command AddCompareCommand(CLI::App& root) {
  CLI::App* app = root.add_subcommand("compare", "Compare predicted and measured metrics");
  return {app, [] { return 2; }};
}
}  // namespace stagecraft::cli
