// `stagecraft profile`: measure the executor's model layer by layer on this machine (cpu
// backend, one core) and write the profile the simulator reads as model.profile (DESIGN.md §3).
// Under `mpirun -np N` every rank profiles at once, so the cores are as loaded (shared caches,
// memory bandwidth, clock) as during an N-rank run; rank 0 keeps the median over the ranks
// (exec/profile.h). With N = pipeline.ranks it then calibrates (exec/calibrate.h): a ping-pong
// between neighbour ranks, an all-reduce over them all, and short runs of the real executor
// whose per-rank op times and overhead the simulator applies on top of the layers.
#include <cstdio>
#include <cstring>
#include <memory>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "commands.h"
#include "command_support.h"
#include "stagecraft/base/format.h"
#include "stagecraft/base/error.h"
#include "stagecraft/base/output_file.h"
#include "stagecraft/base/printable.h"
#include "stagecraft/harness/calibrate.h"
#include "stagecraft/harness/calibration_runs.h"
#include "stagecraft/harness/predict.h"
#include "stagecraft/exec/mpi_transport.h"
#include "stagecraft/harness/profile_layers.h"
#include "stagecraft/exec/runtime.h"
#include "stagecraft/exec/setup_rounds.h"
#include "stagecraft/schedules/generators.h"
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
  int calibration_steps = 10;  // 0: layers only
  std::string backend = "cpu";
  int64_t max_ops = 0;
};

// A scale as the table shows it: "-" for a kind no calibration run had on that rank.
std::string ScaleText(double scale, const harness::ScaleSums* sums, int kind) {
  if (sums == nullptr || sums->isolated[kind] <= 0) return "-";
  return fmt::format("{:.3f}", scale);
}

// The layers' table: what was timed, and each layer's median times and activations.
void PrintLayers(std::FILE* report, const sim::Profile& profile, const sim::Scenario& sc,
                 const exec::TrainingConfig& config, const ProfileFlags& f, int ranks) {
  std::fprintf(report, "profile of %s: %d %s, hidden %d, microbatch %d, median of %d runs on %d rank(s) at once -> %s\n",
              Printable(sc.name).c_str(), exec::NetworkLayers(config), config.gpt ? "blocks" : "layers",
              config.gpt ? config.gpt->hidden : config.model.hidden, config.microbatch_size, f.repeats,
              ranks, f.out_path.c_str());
  std::fprintf(report, "%-6s %12s %15s %16s %12s %14s\n", "layer", "forward", "backward_input", "backward_weight", "step",
              "activations");
  for (size_t l = 0; l < profile.layers.size(); ++l) {
    const sim::LayerProfile& m = profile.layers[l];
    std::fprintf(report, "%-6zu %12s %15s %16s %12s %14s\n", l, FormatDuration(m.forward_ns).c_str(),
                FormatDuration(m.backward_input_ns).c_str(), FormatDuration(m.backward_weight_ns).c_str(),
                FormatDuration(m.step_ns).c_str(), FormatBytes(m.activation_bytes).c_str());
  }
  for (const auto& [name, piece] : {std::pair{"embed", profile.embedding}, std::pair{"head", profile.head}}) {
    if (!piece) continue;
    std::fprintf(report, "%-6s %12s %15s %16s %12s %14s\n", name, FormatDuration(piece->forward_ns).c_str(),
                FormatDuration(piece->backward_input_ns).c_str(),
                FormatDuration(piece->backward_weight_ns).c_str(), FormatDuration(piece->step_ns).c_str(),
                FormatBytes(piece->activation_bytes).c_str());
  }
  std::fprintf(report, "input copy %s (first stage), loss %s (last stage), per forward\n",
              FormatDuration(profile.input_copy_ns).c_str(), FormatDuration(profile.loss_ns).c_str());
}

// The calibration: the p2p fit, the runtime's overhead and noise, and each rank's scales.
void PrintCalibration(std::FILE* report, const sim::Profile& profile, const harness::RunsReport& runs,
                      const sim::Scenario& sc, const ProfileFlags& f) {
  if (profile.p2p) {
    std::fprintf(report, "p2p: latency %s, bandwidth %.2f GB/s, %.0f%% of a %s transfer overlaps the receiver's compute\n",
                FormatDuration(profile.p2p->latency_ns).c_str(), profile.p2p->bytes_per_s * 1e-9,
                100 * profile.p2p->overlap, FormatBytes(profile.send_bytes).c_str());
    if (runs.waited > 0) {
      std::fprintf(report, "p2p in the pipeline: %zu transfers waited through, median %s", runs.waited,
                  FormatDuration(runs.waited_median_ns).c_str());
      if (profile.p2p->pipeline_bytes_per_s > 0) {
        std::fprintf(report, ": %.2f GB/s (the simulator's data rate)\n", profile.p2p->pipeline_bytes_per_s * 1e-9);
      } else {
        std::fprintf(report, " (not slower than the ping-pong: its bandwidth stays)\n");
      }
    }
  } else {
    std::fprintf(report, "p2p: no bandwidth could be fitted (the larger messages were not slower); the topology's links stay\n");
  }
  if (profile.allreduce) {
    std::fprintf(report, "all-reduce over %d ranks: %d steps of %s latency, bus bandwidth %.2f GB/s\n",
                 profile.allreduce->ranks, 2 * (profile.allreduce->ranks - 1),
                 FormatDuration(profile.allreduce->latency_ns).c_str(), profile.allreduce->bus_bytes_per_s * 1e-9);
    if (runs.reduces > 0) {
      std::fprintf(report, "all-reduce in the runs: %zu REDUCE_GRADs, median %s", runs.reduces,
                   FormatDuration(runs.reduce_median_ns).c_str());
      if (profile.allreduce->pipeline_bus_bytes_per_s > 0) {
        std::fprintf(report, ": bus bandwidth %.2f GB/s (the simulator's data rate)\n",
                     profile.allreduce->pipeline_bus_bytes_per_s * 1e-9);
      } else {
        std::fprintf(report, " (not slower than the fit: its bandwidth stays)\n");
      }
    }
  } else {
    std::fprintf(report, "all-reduce: no fit (time did not grow with size, or no group to measure); the plans over the links stay\n");
  }
  std::string by_rank;
  for (size_t r = 0; r < profile.ranks.size(); ++r) {
    by_rank += fmt::format("{}rank {} {}", r == 0 ? " (" : ", ", r,
                           FormatDuration(profile.ranks[r].op_overhead_ns.value_or(profile.op_overhead_ns)));
  }
  if (!by_rank.empty()) by_rank += ")";
  std::fprintf(report, "runtime overhead per op: %s%s\n", FormatDuration(profile.op_overhead_ns).c_str(), by_rank.c_str());
  std::fprintf(report, "an op's time varies by %.1f%% (CV) from one run of it to the next\n", 100 * profile.op_time_cv);
  std::fprintf(report, "in-pipeline / isolated time, per rank (%d-step runs of %s):\n", f.calibration_steps,
              fmt::format("{}", fmt::join(harness::CalibrationSchedules(harness::CalibrationPipeline(sc, f.calibration_steps)), ", ")).c_str());
  std::fprintf(report, "%-5s %-14s %8s %8s %8s %8s %8s\n", "rank", "updates", "F", "B", "I", "W", "STEP");
  for (size_t r = 0; r < profile.ranks.size(); ++r) {
    const auto at = [r](const std::vector<harness::ScaleSums>& v) { return r < v.size() ? &v[r] : nullptr; };
    for (const auto& [what, k, measured] : {std::tuple{"per step", profile.ranks[r].per_step, at(runs.per_step)},
                                            std::tuple{"per microbatch", profile.ranks[r].per_microbatch,
                                                       at(runs.per_microbatch)}}) {
      std::fprintf(report, "%-5zu %-14s %8s %8s %8s %8s %8s\n", r, what, ScaleText(k.forward, measured, 0).c_str(),
                  ScaleText(k.backward, measured, 1).c_str(), ScaleText(k.backward_input, measured, 2).c_str(),
                  ScaleText(k.backward_weight, measured, 3).c_str(), ScaleText(k.step, measured, 4).c_str());
    }
  }
  std::fprintf(report, "(-: no calibration run had that op kind on that rank; its scale is per_step's, else 1)\n");
  if (runs.deep_stash_left_out) {
    std::fprintf(report, "gpipe's run left out: every microbatch held at once is predicted over the device's memory, "
                         "so the stash's slopes are not measured\n");
  }
  bool any = false;
  for (size_t r = 0; r < profile.ranks.size(); ++r) {
    const std::optional<sim::StashScale>& s = profile.ranks[r].stash;
    if (!s) continue;
    if (!any) {
      std::fprintf(report, "time added per microbatch of activations held beyond the shallow runs' mean (in brackets), "
                           "up to the deep run's most:\n");
      any = true;
    }
    std::string kinds;
    for (const auto& [key, field] : sim::kStashFields) {
      const sim::StashSlope& k = (*s).*field;
      if (k.at <= 0 && k.measured_slope <= 0) continue;
      if (k.slope > 0) {
        kinds += fmt::format("  {} {:+.1f}% ({:.2f}; noise {:.1f}%)", key, 100 * k.slope, k.at, 100 * k.noise);
      } else if (k.measured_slope > 0) {
        kinds += fmt::format("  {} +0.0% ({:.2f}; {:+.1f}% measured, within the noise {:.1f}%: not applied)", key,
                             k.at, 100 * k.measured_slope, 100 * k.noise);
      } else {
        kinds += fmt::format("  {} +0.0% ({:.2f})", key, k.at);
      }
    }
    std::fprintf(report, "rank %zu: up to %.2f:%s\n", r, s->deep, kinds.c_str());
  }
}

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
    config = exec::TrainingConfigFor(sc);
    backend = BackendFor(f.backend, sc);
    if (rank == 0) out = outputs.Add(f.out_path, "--out");
    if (f.calibration_steps > 0) {
      const sim::PipelineSpec calibration = harness::CalibrationPipeline(sc, f.calibration_steps);
      harness::CheckScheduleSizes(calibration, harness::CalibrationSchedules(calibration), f.max_ops);
    }
  } catch (const std::exception& e) {
    error = e.what();
  }
  if (AnyRankFailed(error)) return 1;
  // A job of pipeline.ranks x data_parallel processes runs the replicas as `execute` does (each
  // replica's pipeline its own transport, each pipeline rank's replicas a group), so that the
  // layers are timed with every replica computing at once and the calibration runs are the
  // job's own; any other job size profiles one pipeline.
  const int replicas = sc.pipeline.data_parallel > 1 &&
                               exec::MpiWorldSize() == int64_t{sc.pipeline.ranks} * sc.pipeline.data_parallel
                           ? sc.pipeline.data_parallel
                           : 1;
  exec::ProcessRuntime runtime = StartRuntime(backend, sc, exec::kDefaultWaitDeadline, replicas);
  std::unique_ptr<exec::Device>& device = runtime.device;
  std::unique_ptr<exec::Transport>& transport = runtime.transport;
  transport->Barrier();
  // Each rank holds about layers / pipeline.ranks layers in a run (interleaved or not, and in
  // every replica): that share is what passes through its caches, so layers are timed in groups
  // of that size.
  const int share = (exec::NetworkLayers(config) + sc.pipeline.ranks - 1) / sc.pipeline.ranks;
  // Ranks that share a device (pipeline.ranks_per_device k) time their layers in k turns, the
  // ranks k*j + t in turn t, so that each layer's cost is the device's own: the simulator shares
  // the device between them itself (docs/scenario.md, "Ranks that share a device").
  const int turns = std::max(1, std::min(sc.pipeline.ranks_per_device, transport->size()));
  sim::Profile profile;
  for (int turn = 0; turn < turns; ++turn) {
    if (transport->rank() % turns == turn) {
      profile = harness::ProfileLayers(config, *device, f.repeats, f.warmup, share);
    }
    if (turns > 1) transport->Barrier();
  }
  const std::vector<std::string> gathered = transport->Gather(harness::LayersToBytes(profile.layers), 0);
  if (rank == 0) {
    std::vector<std::vector<sim::LayerProfile>> per_rank;
    for (const std::string& bytes : gathered) per_rank.push_back(harness::LayersFromBytes(bytes));
    profile.layers = harness::MedianOverRanks(per_rank);
  }
  const bool calibrate =
      f.calibration_steps > 0 && transport->size() == sc.pipeline.ranks && (sc.pipeline.ranks >= 2 || replicas > 1);
  harness::RunsReport runs;
  try {
    if (calibrate) {
      if (transport->size() >= 2) {  // a one-rank pipeline (of replicas) has no neighbour
        const sim::P2pProfile fit = harness::CalibrateP2p(*transport, *device, profile.send_bytes);
        if (rank == 0 && fit.bytes_per_s > 0) profile.p2p = fit;
      }
      profile.allreduce = harness::CalibrateAllReduce(backend, *device, *transport, profile, exec::kDefaultWaitDeadline,
                                                      runtime.replicas.get());
      runs = harness::CalibrateRuns(sc, config, f.calibration_steps, *device, *transport, &profile,
                                    runtime.replicas.get());
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "stagecraft: error: rank %d (%s): calibration: %s\n", rank, exec::HostName().c_str(),
                 Printable(e.what()).c_str());
    transport->Abort(1);
  }
  if (rank != 0) return 0;
  profile.device = backend == exec::Backend::kCpu ? device->Name() + "-core" : device->Name();
  outputs.Set(out, sim::ProfileToYaml(profile));
  outputs.Commit();
  // With the profile on standard output, the report goes to standard error.
  std::FILE* report = outputs.WritesStdout() ? stderr : stdout;
  PrintLayers(report, profile, sc, config, f, exec::MpiWorldSize());
  if (!calibrate) {
    const char* why = f.calibration_steps == 0       ? "--calibration-steps 0"
                      : sc.pipeline.ranks < 2 && replicas == 1
                          ? "a one-rank pipeline without replicas has nothing to calibrate against"
                          : "run it on pipeline.ranks x pipeline.data_parallel MPI ranks to calibrate";
    std::fprintf(report, "not calibrated (%s): the layers alone\n", why);
    return 0;
  }
  PrintCalibration(report, profile, runs, sc, f);
  return 0;
}

}  // namespace

Command AddProfileCommand(CLI::App& root) {
  auto flags = std::make_shared<ProfileFlags>();
  CLI::App* app = root.add_subcommand("profile", "Measure per-layer costs of a scenario's model on this machine");
  app->add_option("scenario", flags->scenario, "Scenario YAML (with model.mlp or model.transformer, and training)")->required();
  app->add_option("--out", flags->out_path, "Profile YAML to write (use as model.profile; - for standard output)")
      ->required();
  app->add_option("--set", flags->sets, "Override a scenario key (repeatable)");
  app->add_option("--repeats", flags->repeats, "Timed runs per layer (the median is kept)")
      ->check(CLI::Range(1, 100000));
  app->add_option("--warmup", flags->warmup, "Untimed runs per layer first")->check(CLI::Range(0, 100000));
  app->add_option("--calibration-steps", flags->calibration_steps,
                  "Steps of each calibration run of the executor (0: profile the layers only)")
      ->check(CLI::Range(0, 1000));
  AddBackendOption(app, &flags->backend);
  AddMaxOpsOption(app, &flags->max_ops);
  return {app, [flags] { return Run(*flags); }};
}

}  // namespace stagecraft::cli
