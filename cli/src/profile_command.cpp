// `stagecraft profile`: measure the executor's model layer by layer on this machine (cpu
// backend, one core) and write the profile the simulator reads as model.profile (DESIGN.md §3).
// Under `mpirun -np N` every rank profiles at once, so the cores are as loaded (shared caches,
// memory bandwidth, clock) as during an N-rank run; rank 0 keeps the median over the ranks.
// With N = pipeline.ranks (x pipeline.data_parallel) it then calibrates: a ping-pong between
// neighbour ranks, an all-reduce over them all, and short runs of the real executor whose
// per-rank op times and overhead the simulator applies on top of the layers. The workflow and
// its report are harness/profile_job.h's; this file parses, calls and prints.
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "commands.h"
#include "command_support.h"
#include "stagecraft/base/error.h"
#include "stagecraft/base/output_file.h"
#include "stagecraft/base/printable.h"
#include "stagecraft/exec/mpi_transport.h"
#include "stagecraft/exec/runtime.h"
#include "stagecraft/harness/calibration_runs.h"
#include "stagecraft/harness/predict.h"
#include "stagecraft/harness/profile_job.h"
#include "stagecraft/scenario/profile.h"
#include "stagecraft/sim/scenario_checks.h"

namespace stagecraft::cli {
namespace {

struct ProfileFlags {
  std::string scenario;
  std::vector<std::string> sets;
  std::string out_path;
  harness::ProfileOptions options;
  std::string backend = "cpu";
  int64_t max_ops = 0;
};

int Run(const ProfileFlags& f) {
  exec::MpiSession session(nullptr, nullptr);
  const int rank = exec::MpiWorldRank();
  sim::Scenario sc;
  exec::TrainingConfig config;
  exec::Backend backend = exec::Backend::kCpu;
  // The profile is written by rank 0, into a path checked before any work.
  OutputSet outputs;
  int out = -1;
  std::string error;
  try {
    sc = sim::LoadScenario(f.scenario, f.sets);
    RefuseWorkload(sc, "profile");
    config = exec::TrainingConfigFor(sc);
    backend = BackendFor(f.backend, sc);
    if (rank == 0) out = outputs.Add(f.out_path, "--out");
    if (f.options.calibration_steps > 0) {
      const sim::PipelineSpec calibration = harness::CalibrationPipeline(sc, f.options.calibration_steps);
      harness::CheckScheduleSizes(calibration, harness::CalibrationSchedules(calibration), f.max_ops);
    }
  } catch (const std::exception& e) {
    error = e.what();
  }
  if (AnyRankFailed(error)) return 1;
  const int replicas = harness::ProfileReplicas(sc, exec::MpiWorldSize());
  exec::ProcessRuntime runtime = StartRuntime(backend, sc, exec::kDefaultWaitDeadline, replicas);
  sim::Profile profile = harness::ProfileLayersOnRanks(sc, config, *runtime.device, *runtime.transport, f.options);
  const std::string not_calibrated = harness::NotCalibratedWhy(sc, f.options, runtime.transport->size(), replicas);
  harness::RunsReport runs;
  try {
    if (not_calibrated.empty()) runs = harness::CalibrateProfile(sc, config, backend, runtime, f.options, &profile);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "stagecraft: error: rank %d (%s): calibration: %s\n", rank, exec::HostName().c_str(),
                 Printable(e.what()).c_str());
    runtime.transport->Abort(1);
  }
  if (rank != 0) return 0;
  profile.device = backend == exec::Backend::kCpu ? runtime.device->Name() + "-core" : runtime.device->Name();
  outputs.Set(out, sim::ProfileToYaml(profile));
  outputs.Commit();
  // With the profile on standard output, the report goes to standard error.
  std::string report = harness::ProfileLayersText(profile, sc, config, f.options, exec::MpiWorldSize(), f.out_path);
  report += not_calibrated.empty() ? harness::CalibrationText(profile, runs, sc, f.options)
                                   : "not calibrated (" + not_calibrated + "): the layers alone\n";
  WriteReport(outputs, report);
  return 0;
}

}  // namespace

Command AddProfileCommand(CLI::App& root) {
  auto flags = std::make_shared<ProfileFlags>();
  CLI::App* app = root.add_subcommand("profile", "Measure per-layer costs of a scenario's model on this machine");
  AddScenarioOptions(app, &flags->scenario, &flags->sets,
                     "Scenario YAML (with model.mlp or model.transformer, and training)");
  app->add_option("--out", flags->out_path, "Profile YAML to write (use as model.profile; - for standard output)")
      ->required();
  app->add_option("--repeats", flags->options.repeats, "Timed runs per layer (the median is kept)")
      ->check(CLI::Range(1, 100000));
  app->add_option("--warmup", flags->options.warmup, "Untimed runs per layer first")->check(CLI::Range(0, 100000));
  app->add_option("--calibration-steps", flags->options.calibration_steps,
                  "Steps of each calibration run of the executor (0: profile the layers only)")
      ->check(CLI::Range(0, 1000));
  AddBackendOption(app, &flags->backend);
  AddMaxOpsOption(app, &flags->max_ops);
  return {app, [flags] { return Run(*flags); }};
}

}  // namespace stagecraft::cli
