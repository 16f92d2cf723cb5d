// Schedule selection and trace naming shared by simulate and execute (see scenario_runs.h).
#include "scenario_runs.h"

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>

#include <fmt/format.h>

#include "stagecraft/base/check.h"
#include "stagecraft/base/error.h"
#include "stagecraft/exec/cuda_device.h"
#include "stagecraft/exec/mpi_transport.h"
#include "stagecraft/schedules/csv_io.h"
#include "stagecraft/schedules/generators.h"
#include "stagecraft/schedules/lower.h"
#include "stagecraft/schedules/validate.h"
#include "stagecraft/sim/costs.h"
#include "stagecraft/sim/engine.h"
#include "stagecraft/sim/units.h"

namespace stagecraft::cli {

using namespace stagecraft::schedules;

namespace {

// A schedule file of the scenario: one step of its order, run p.steps times, its stages per
// rank and placement inferred, lowered unless the file carries its transfers.
Schedule ImportScheduleFile(const sim::PipelineSpec& p, const std::string& name, const std::string& path) {
  CsvImportOptions options;
  options.name = name;
  options.chunks = 0;
  options.microbatches = p.microbatches;
  options.steps = p.steps;
  options.repeat_one_step = true;
  Schedule s = ImportCsv(ReadTextFile(path), path, options);
  if (s.ranks() != p.ranks) {
    throw InputError(fmt::format("{}: {} rows (ranks), but pipeline.ranks is {}", path, s.ranks(), p.ranks));
  }
  if (!s.lowered) s = Lower(s, p.p2p);
  if (const auto diags = Validate(s); !diags.empty()) {
    throw InputError(fmt::format("{}: not a valid schedule for {} microbatches: {}: {}", path, p.microbatches,
                                 DiagCodeName(diags.front().code), diags.front().message));
  }
  return s;
}

}  // namespace

std::string ReadTextFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw InputError(fmt::format("{}: cannot open file", path));
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

std::vector<Schedule> ScenarioSchedules(const sim::PipelineSpec& p, bool report_skipped) {
  std::vector<const GeneratorInfo*> picked;
  if (p.schedules.size() == 1 && p.schedules[0] == "all") {
    for (const auto& info : Generators()) {
      const std::string why = CheckParams(info, sim::GeneratorParamsFor(p, info));
      if (why.empty()) picked.push_back(&info);
      else if (report_skipped) std::fprintf(stderr, "note: skipping %s\n", why.c_str());  // why names the schedule
    }
  } else {
    for (const auto& name : p.schedules) {
      const GeneratorInfo* info = FindGenerator(name);
      SC_CHECK(info != nullptr || p.schedule_files.contains(name), "LoadScenario rejects unknown schedules");
      picked.push_back(info);  // null: a schedule file
    }
  }
  std::vector<Schedule> out;
  for (size_t k = 0; k < picked.size(); ++k) {
    if (picked[k] == nullptr) {
      const std::string& name = p.schedules[k];
      out.push_back(ImportScheduleFile(p, name, p.schedule_files.at(name)));
      continue;
    }
    Schedule s = Lower(Generate(picked[k]->name, sim::GeneratorParamsFor(p, *picked[k])), p.p2p);
    const auto diags = Validate(s);
    SC_CHECK(diags.empty(), diags.empty() ? "" : diags.front().message);
    out.push_back(std::move(s));
  }
  return out;
}

Prediction Predict(const sim::Scenario& sc, const sim::Topology& topo, Schedule schedule) {
  Prediction p;
  p.schedule = std::move(schedule);
  const sim::CostTable costs = sim::BuildCosts(sc, p.schedule);
  p.cost_source = costs.source;
  sim::SimConfig config;
  config.device_memory_bytes = sc.topology.device.memory_bytes;
  p.result = sim::Simulate(p.schedule, costs, topo, config);
  p.metrics = ComputeMetrics(p.schedule, p.result, sc.pipeline.microbatch_size);
  return p;
}

void RefusePredictedOom(const sim::Scenario& sc, const std::vector<Prediction>& predictions) {
  std::string why;
  for (const Prediction& p : predictions) {
    if (!p.metrics.AnyOom()) continue;
    std::string peaks;
    for (const auto& r : p.metrics.ranks_detail) {
      peaks += fmt::format("{}rank {} {}", peaks.empty() ? "" : ", ", r.rank, sim::FormatBytes(r.peak_memory_bytes));
    }
    why += fmt::format("{}{} ({})", why.empty() ? "" : "; ", p.schedule.name, peaks);
  }
  if (why.empty()) return;
  throw InputError(fmt::format("{}: predicted to exceed the device memory of {} (topology.device.memory): {}; "
                               "nothing was run (fewer microbatches in flight, recompute, more ranks or another "
                               "schedule would fit)",
                               sc.path, sim::FormatBytes(sc.topology.device.memory_bytes), why));
}

int ReportInputErrorOnce(const InputError& error) {
  auto transport = exec::MakeMpiTransport();
  if (transport->rank() == 0) {
    std::fprintf(stderr, "stagecraft: error: %s\n", error.what());
    std::fflush(stderr);
  }
  transport->Barrier();
  return 1;
}

void AddBackendOption(CLI::App* app, std::string* flag) {
  app->add_option("--backend", *flag, "Where to run: cpu, cuda, or auto (cuda when a CUDA device is visible)")
      ->check(CLI::IsMember({"cpu", "cuda", "auto"}))
      ->default_val("cpu");
}

exec::Backend BackendFor(const std::string& flag, const sim::Scenario& scenario) {
  const exec::Backend backend = exec::ChooseBackend(flag, exec::CudaDeviceCount(), exec::HaveCudaBackend());
  exec::CheckDtype(scenario, backend);
  return backend;
}

exec::ProcessRuntime StartRuntime(exec::Backend backend, const sim::Scenario& scenario,
                                  std::chrono::nanoseconds deadline) {
  try {
    return exec::MakeProcessRuntime(backend, scenario, deadline);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "stagecraft: error: rank %d (%s): %s\n", exec::MpiWorldRank(), exec::HostName().c_str(),
                 e.what());
    exec::MakeMpiTransport()->Abort(1);
    std::_Exit(1);  // Abort does not return; this only tells the compiler so
  }
}

std::string TracePath(const std::string& path, const std::string& name, bool several) {
  if (!several) return path;
  // A schedule file's name may hold a folder ("orders/v.csv"): one file name of it.
  std::string schedule = name;
  for (char& c : schedule) {
    const bool safe = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' ||
                      c == '_' || c == '.';
    if (!safe) c = '_';
  }
  const size_t dot = path.rfind('.');
  const size_t slash = path.rfind('/');
  if (dot == std::string::npos || (slash != std::string::npos && dot < slash)) return path + "." + schedule;
  return path.substr(0, dot) + "." + schedule + path.substr(dot);
}

}  // namespace stagecraft::cli
