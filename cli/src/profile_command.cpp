// `stagecraft profile`: measure the executor's model layer by layer on this machine (cpu
// backend, one core) and write the profile the simulator reads as model.profile (DESIGN.md §3).
// Under `mpirun -np N` every rank profiles at once, so the cores are as loaded (shared caches,
// memory bandwidth, clock) as during an N-rank run; rank 0 keeps the median over the ranks
// (exec/profile.h).
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "commands.h"
#include "scenario_runs.h"
#include "stagecraft/base/atomic_file.h"
#include "stagecraft/base/error.h"
#include "stagecraft/exec/cpu_device.h"
#include "stagecraft/exec/mpi_transport.h"
#include "stagecraft/exec/profile.h"
#include "stagecraft/sim/costs.h"
#include "stagecraft/sim/scenario.h"
#include "stagecraft/sim/units.h"

namespace stagecraft::cli {
namespace {

struct ProfileFlags {
  std::string scenario;
  std::vector<std::string> sets;
  std::string out_path;
  int repeats = 20;
  int warmup = 3;
};

int Run(const ProfileFlags& f) {
  exec::MpiSession session(nullptr, nullptr);
  const int rank = exec::MpiWorldRank();
  sim::Scenario sc;
  exec::TrainingConfig config;
  try {
    sc = sim::LoadScenario(f.scenario, f.sets);
    config = exec::TrainingConfigFor(sc);
  } catch (const stagecraft::InputError& e) {
    return ReportInputErrorOnce(e);
  }
  auto device = exec::MakeCpuDevice();
  auto transport = exec::MakeMpiTransport();
  transport->Barrier();
  // Each rank holds about layers / ranks layers in a run (interleaved or not): that share is
  // what passes through its caches, so layers are timed in groups of that size.
  const int share = (config.model.layers + transport->size() - 1) / transport->size();
  sim::Profile profile = exec::ProfileLayers(config, *device, f.repeats, f.warmup, share);
  const std::vector<std::string> gathered = transport->Gather(exec::LayersToBytes(profile.layers), 0);
  if (rank != 0) return 0;
  std::vector<std::vector<sim::LayerProfile>> per_rank;
  for (const std::string& bytes : gathered) per_rank.push_back(exec::LayersFromBytes(bytes));
  profile.layers = exec::MedianOverRanks(per_rank);
  profile.device = device->Name() + "-core";
  stagecraft::WriteTextFileAtomically(f.out_path, sim::ProfileToYaml(profile));
  std::printf("profile of %s: %d layers, hidden %d, microbatch %d, median of %d runs on %d rank(s) at once -> %s\n",
              sc.name.c_str(), config.model.layers, config.model.hidden, config.microbatch_size, f.repeats,
              transport->size(), f.out_path.c_str());
  std::printf("%-6s %12s %15s %16s %12s %14s\n", "layer", "forward", "backward_input", "backward_weight", "step",
              "activations");
  for (size_t l = 0; l < profile.layers.size(); ++l) {
    const sim::LayerProfile& m = profile.layers[l];
    std::printf("%-6zu %12s %15s %16s %12s %14s\n", l, sim::FormatDuration(m.forward_ns).c_str(),
                sim::FormatDuration(m.backward_input_ns).c_str(), sim::FormatDuration(m.backward_weight_ns).c_str(),
                sim::FormatDuration(m.step_ns).c_str(), sim::FormatBytes(m.activation_bytes).c_str());
  }
  return 0;
}

}  // namespace

Command AddProfileCommand(CLI::App& root) {
  auto flags = std::make_shared<ProfileFlags>();
  CLI::App* app = root.add_subcommand("profile", "Measure per-layer costs of a scenario's model on this machine");
  app->add_option("scenario", flags->scenario, "Scenario YAML (with model.mlp and training)")->required();
  app->add_option("--out", flags->out_path, "Profile YAML to write (use as model.profile)")->required();
  app->add_option("--set", flags->sets, "Override a scenario key (repeatable)");
  app->add_option("--repeats", flags->repeats, "Timed runs per layer (the median is kept)")
      ->check(CLI::Range(1, 100000));
  app->add_option("--warmup", flags->warmup, "Untimed runs per layer first")->check(CLI::Range(0, 100000));
  return {app, [flags] { return Run(*flags); }};
}

}  // namespace stagecraft::cli
