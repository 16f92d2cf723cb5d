// Schedule selection and trace naming shared by simulate and execute (see scenario_runs.h).
#include "scenario_runs.h"

#include <cstdio>
#include <cstdlib>

#include "stagecraft/base/check.h"
#include "stagecraft/base/error.h"
#include "stagecraft/exec/cuda_device.h"
#include "stagecraft/exec/mpi_transport.h"
#include "stagecraft/schedules/generators.h"
#include "stagecraft/schedules/lower.h"
#include "stagecraft/schedules/validate.h"

namespace stagecraft::cli {

using namespace stagecraft::schedules;

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
      SC_CHECK(info != nullptr, "LoadScenario rejects unknown schedules");
      picked.push_back(info);
    }
  }
  std::vector<Schedule> out;
  for (const GeneratorInfo* info : picked) {
    Schedule s = Lower(Generate(info->name, sim::GeneratorParamsFor(p, *info)), p.p2p);
    const auto diags = Validate(s);
    SC_CHECK(diags.empty(), diags.empty() ? "" : diags.front().message);
    out.push_back(std::move(s));
  }
  return out;
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

exec::ProcessRuntime StartRuntime(exec::Backend backend, const sim::Scenario& scenario) {
  try {
    return exec::MakeProcessRuntime(backend, scenario);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "stagecraft: error: rank %d (%s): %s\n", exec::MpiWorldRank(), exec::HostName().c_str(),
                 e.what());
    exec::MakeMpiTransport()->Abort(1);
    std::_Exit(1);  // Abort does not return; this only tells the compiler so
  }
}

std::string TracePath(const std::string& path, const std::string& schedule, bool several) {
  if (!several) return path;
  const size_t dot = path.rfind('.');
  const size_t slash = path.rfind('/');
  if (dot == std::string::npos || (slash != std::string::npos && dot < slash)) return path + "." + schedule;
  return path.substr(0, dot) + "." + schedule + path.substr(dot);
}

}  // namespace stagecraft::cli
