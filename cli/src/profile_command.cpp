// `stagecraft profile`: measure the executor's model layer by layer on this machine (cpu
// backend, one core) and write the profile the simulator reads as model.profile (DESIGN.md §3).
// Under `mpirun -np N` every rank profiles at once, so the cores are as loaded (shared caches,
// memory bandwidth, clock) as during an N-rank run; rank 0 keeps the median over the ranks.
#include <algorithm>
#include <cstdio>
#include <cstring>
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
#include "stagecraft/schedules/trace.h"
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

sim::Profile ToProfile(const exec::TrainingConfig& config, const std::string& device,
                       const std::vector<exec::LayerMeasurement>& layers) {
  sim::Profile p;
  p.device = device;
  p.microbatch_size = config.microbatch_size;
  p.send_bytes = layers.empty() ? 0 : layers.front().send_bytes;
  for (const exec::LayerMeasurement& m : layers) {
    sim::LayerProfile l;
    l.forward_ns = m.forward_ns;
    l.backward_input_ns = m.backward_input_ns;
    l.backward_weight_ns = m.backward_weight_ns;
    l.step_ns = m.step_ns;
    l.activation_bytes = m.activation_bytes;
    l.weight_bytes = m.weight_bytes;
    l.w_stash_bytes = m.w_stash_bytes;
    l.grad_bytes = m.weight_bytes;
    l.optimizer_bytes = m.optimizer_bytes;
    p.layers.push_back(l);
  }
  return p;
}

// Per layer and field, the median over the ranks' measurements (each rank's as raw bytes).
std::vector<exec::LayerMeasurement> MedianOverRanks(const std::vector<std::string>& per_rank) {
  std::vector<std::vector<exec::LayerMeasurement>> all;
  for (const std::string& bytes : per_rank) {
    all.emplace_back(bytes.size() / sizeof(exec::LayerMeasurement));
    std::memcpy(all.back().data(), bytes.data(), bytes.size());
  }
  std::vector<exec::LayerMeasurement> out = all.front();
  constexpr size_t kFields = sizeof(exec::LayerMeasurement) / sizeof(int64_t);
  for (size_t l = 0; l < out.size(); ++l) {
    for (size_t field = 0; field < kFields; ++field) {
      std::vector<int64_t> values;
      for (const auto& rank : all) values.push_back(reinterpret_cast<const int64_t*>(&rank[l])[field]);
      std::sort(values.begin(), values.end());
      reinterpret_cast<int64_t*>(&out[l])[field] = values[values.size() / 2];
    }
  }
  return out;
}

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
  const auto mine = exec::ProfileLayers(config, *device, f.repeats, f.warmup);
  const auto gathered = transport->Gather(
      std::string(reinterpret_cast<const char*>(mine.data()), mine.size() * sizeof(exec::LayerMeasurement)), 0);
  if (rank != 0) return 0;
  const auto layers = MedianOverRanks(gathered);
  const sim::Profile profile = ToProfile(config, device->Name() + "-core", layers);
  stagecraft::WriteTextFileAtomically(f.out_path, sim::ProfileToYaml(profile));
  std::printf("profile of %s: %d layers, hidden %d, microbatch %d, median of %d runs on %d rank(s) at once -> %s\n",
              sc.name.c_str(), config.model.layers, config.model.hidden, config.microbatch_size, f.repeats,
              transport->size(), f.out_path.c_str());
  std::printf("%-6s %12s %15s %16s %12s %14s\n", "layer", "forward", "backward_input", "backward_weight", "step",
              "activations");
  for (size_t l = 0; l < layers.size(); ++l) {
    const auto& m = layers[l];
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
