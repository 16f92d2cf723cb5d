// `stagecraft compare`: set the metrics JSON of `simulate --json` (predicted) beside that of
// `execute --json` (measured), schedule by schedule, and report the signed relative errors
// (predicted − measured) / measured; optionally fail when a step-time error is too large (a
// partial run's unfinished schedule included).
#include <cstdio>
#include <memory>
#include <string>

#include "commands.h"
#include "stagecraft/base/output_file.h"
#include "stagecraft/harness/compare.h"

namespace stagecraft::cli {
namespace {

constexpr int kExceededExitCode = 3;

// CLI11's own range check prints the largest double in its message; this one reads plainly.
const CLI::Validator kNonNegativePercent(
    [](std::string& text) {
      double pct = 0;
      return CLI::detail::lexical_cast(text, pct) && pct >= 0 ? std::string()
                                                              : "expected a percentage >= 0, got " + text;
    },
    "");

struct CompareFlags {
  std::string predicted_path;
  std::string measured_path;
  std::string json_path;
  double max_error_pct = -1;  // negative: no limit
  std::string trace_path;     // the measured traces, as execute --trace named them
};

int Run(const CompareFlags& f) {
  OutputSet outputs;  // --json is checked before any input is read
  const int json_output = f.json_path.empty() ? -1 : outputs.Add(f.json_path, "--json");
  const harness::RunFile predicted = harness::ReadRunFile(f.predicted_path);
  const harness::RunFile measured = harness::ReadRunFile(f.measured_path);
  harness::CompareOptions options;
  options.max_error_pct = f.max_error_pct;
  options.trace_path = f.trace_path;
  options.warn = [](const std::string& line) { std::fprintf(stderr, "%s\n", line.c_str()); };
  // Everything is checked and computed before anything is written or printed.
  const harness::Comparison c = harness::CompareRuns(predicted, measured, options);
  if (json_output >= 0) {
    outputs.Set(json_output, c.json);
    outputs.Commit();
  }
  // With --json - the JSON has standard output to itself, and the table goes to stderr.
  std::fwrite(c.text.data(), 1, c.text.size(), outputs.WritesStdout() ? stderr : stdout);
  return c.exceeded.empty() ? 0 : kExceededExitCode;
}

}  // namespace

Command AddCompareCommand(CLI::App& root) {
  auto flags = std::make_shared<CompareFlags>();
  CLI::App* app =
      root.add_subcommand("compare", "Compare predicted (simulate --json) and measured (execute --json) metrics");
  app->add_option("predicted", flags->predicted_path, "Metrics JSON written by `stagecraft simulate --json`")
      ->required();
  app->add_option("measured", flags->measured_path, "Metrics JSON written by `stagecraft execute --json`")->required();
  app->add_option("--max-error", flags->max_error_pct,
                  "Exit with code 3 when a step-time error exceeds PCT percent (a partial run's included)")
      ->check(kNonNegativePercent)
      ->type_name("PCT");
  app->add_option("--json", flags->json_path, "Write the comparison as JSON");
  app->add_option("--trace", flags->trace_path,
                  "The measured trace(s) (execute --trace's name): split each step-time error into cost drift and "
                  "model error by replaying the run");
  return {app, [flags] { return Run(*flags); }};
}

}  // namespace stagecraft::cli
