// The commands' shared pieces (see command_support.h): flags, the runtime's start, one error
// line per job, trace paths, the report.
#include "command_support.h"

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <stdexcept>
#include <thread>

#include <fmt/format.h>

#include "stagecraft/base/check.h"
#include "stagecraft/base/error.h"
#include "stagecraft/base/input_file.h"
#include "stagecraft/base/printable.h"
#include "stagecraft/exec/devices.h"
#include "stagecraft/exec/mpi_transport.h"
#include "stagecraft/schedules/budget.h"
#include "stagecraft/schedules/csv_io.h"
#include "stagecraft/schedules/generators.h"
#include "stagecraft/schedules/lower.h"
#include "stagecraft/schedules/metrics_json.h"
#include "stagecraft/schedules/trace.h"
#include "stagecraft/schedules/validate.h"
#include "stagecraft/sim/costs.h"
#include "stagecraft/sim/engine.h"
#include "stagecraft/scenario/units.h"

namespace stagecraft::cli {

using namespace stagecraft::schedules;


bool AnyRankFailed(const std::string& error) {
  auto transport = exec::MakeMpiTransport();
  const std::vector<std::string> all = transport->Gather(error, 0);
  std::string verdict;
  if (transport->rank() == 0) {
    const auto first = std::find_if(all.begin(), all.end(), [](const std::string& e) { return !e.empty(); });
    if (first != all.end()) {
      // The same error on every rank is the input's; one rank's alone is that rank's (its node).
      const bool same = std::all_of(all.begin(), all.end(), [&](const std::string& e) { return e == *first; });
      const std::string where = same ? "" : fmt::format("rank {}: ", first - all.begin());
      std::fprintf(stderr, "stagecraft: error: %s%s\n", where.c_str(), Printable(*first).c_str());
      std::fflush(stderr);
      verdict = "1";
    }
  }
  transport->Broadcast(&verdict, 0);
  return !verdict.empty();
}

void AddScenarioOptions(CLI::App* app, std::string* scenario, std::vector<std::string>* sets, const std::string& help,
                        const std::string& example) {
  app->add_option("scenario", *scenario, help)->required();
  app->add_option("--set", *sets, fmt::format("Override a scenario key: --set {} (repeatable)", example));
}

void AddMaxOpsOption(CLI::App* app, int64_t* max_ops) {
  *max_ops = kDefaultMaxOps;
  app->add_option("--max-ops", *max_ops,
                  "Refuse to build schedules estimated to hold more ops than this (about 200 bytes of memory each)")
      ->check(CLI::Range(int64_t{1}, kMaxMaxOps))
      ->capture_default_str();
}

void AddBackendOption(CLI::App* app, std::string* flag) {
  app->add_option("--backend", *flag, "Where to run: cpu, cuda, or auto (cuda when `stagecraft devices` says usable)")
      ->check(CLI::IsMember({"cpu", "cuda", "auto"}))
      ->default_val("cpu");
}

exec::Backend BackendFor(const std::string& flag, const sim::Scenario& scenario) {
  const exec::Backend backend = exec::ChooseBackend(flag, exec::JudgeDevices(exec::ProbeCuda(false)));
  exec::CheckDtype(scenario, backend);
  return backend;
}

namespace {

// The test hook of start-up (scenario_runs.h): "RANK[:STEP[:KIND]]" makes that rank's step
// (device by default) throw, or hang for good. A malformed value fails every rank's first step
// alike.
std::function<void(exec::StartupStep)> StartupFaultHook(const char* value) {
  if (value == nullptr || *value == '\0') return {};
  const std::string text = value;
  std::vector<std::string> parts;
  for (size_t begin = 0; begin <= text.size();) {
    const size_t end = std::min(text.find(':', begin), text.size());
    parts.push_back(text.substr(begin, end - begin));
    begin = end + 1;
  }
  const std::string step = parts.size() > 1 ? parts[1] : "device";
  const std::string kind = parts.size() > 2 ? parts[2] : "throw";
  const bool digits = !parts[0].empty() && parts[0].size() <= 6 &&
                      std::all_of(parts[0].begin(), parts[0].end(), [](unsigned char c) { return std::isdigit(c); });
  const int rank = digits ? std::stoi(parts[0]) : -1;
  if (rank < 0 || rank >= exec::MpiWorldSize() || parts.size() > 3 || (step != "device" && step != "transport") ||
      (kind != "throw" && kind != "hang")) {
    const std::string why =
        fmt::format("{}='{}': expected RANK[:device|transport[:throw|hang]] with a rank of the job (0..{})",
                    kStartupFaultVariable, Printable(text), exec::MpiWorldSize() - 1);
    return [why](exec::StartupStep) { throw InputError(why); };
  }
  const exec::StartupStep at = step == "device" ? exec::StartupStep::kDevice : exec::StartupStep::kTransport;
  return [rank, at, hang = kind == "hang", text](exec::StartupStep now) {
    if (now != at || exec::MpiWorldRank() != rank) return;
    while (hang) std::this_thread::sleep_for(std::chrono::hours(1));  // until the job is ended
    throw std::runtime_error(fmt::format("injected start-up fault ({}={}, a test hook)", kStartupFaultVariable, text));
  };
}

}  // namespace

exec::ProcessRuntime StartRuntime(exec::Backend backend, const sim::Scenario& scenario,
                                  std::chrono::nanoseconds deadline, int data_parallel) {
  exec::StartupOptions options;
  options.deadline = deadline;
  options.data_parallel = data_parallel;
  options.on_step = StartupFaultHook(std::getenv(kStartupFaultVariable));
  options.report = [](const std::string& line) {
    std::fprintf(stderr, "stagecraft: error: %s\n", Printable(line).c_str());
    std::fflush(stderr);
  };
  try {
    return exec::MakeProcessRuntime(backend, scenario, options);
  } catch (const exec::StartupFailed&) {
    throw Reported{1};  // every rank knows, and the cause is out: exit 1 after MPI_Finalize
  }
}

std::vector<int> AddTraceOutputs(OutputSet& outputs, const std::string& path, const std::vector<std::string>& names,
                                 const std::string& flag) {
  std::vector<int> handles;
  if (path.empty()) return handles;
  const bool several = names.size() > 1;
  if (several) {
    const OutputTarget given = CheckOutputPath(path, flag);
    if (given.kind != OutputTarget::Kind::kFile) {
      throw InputError(fmt::format("{} {}: {} schedules write a trace each, and a stream takes one; name a file "
                                   "(each schedule's trace goes beside it) or pick one schedule with --set "
                                   "pipeline.schedule=NAME",
                                   flag, path, names.size()));
    }
  }
  for (const std::string& name : names) handles.push_back(outputs.Add(TracePath(path, name, several), flag));
  return handles;
}

void SetPredictedOutputs(OutputSet& outputs, int json, const std::vector<int>& traces, const sim::Scenario& scenario,
                         const std::string& costs, const std::vector<harness::Prediction>& predictions) {
  if (json >= 0) {
    outputs.Set(json, schedules::MetricsFileToJson(harness::PredictedMetricsFile(scenario, costs, predictions)));
  }
  for (size_t k = 0; k < traces.size(); ++k) {
    outputs.Set(traces[k], schedules::TraceToJson(harness::PredictedTrace(scenario, costs, predictions[k])));
  }
}

void RefuseWorkload(const sim::Scenario& scenario, std::string_view command) {
  if (scenario.tasks.empty()) return;
  throw InputError(fmt::format("{}: tasks: {} runs one model and the scenario lists {} tasks; `stagecraft simulate` "
                               "runs the workload (drop tasks: to {} the scenario's own model)",
                               scenario.path, command, scenario.tasks.size(), command));
}

void WriteReport(const OutputSet& outputs, const std::string& report) {
  std::fwrite(report.data(), 1, report.size(), outputs.WritesStdout() ? stderr : stdout);
}

}  // namespace stagecraft::cli
