// `stagecraft profile`: measure the executor's model layer by layer on this machine (cpu
// backend, one core) and write the profile the simulator reads as model.profile (DESIGN.md §3).
// Under `mpirun -np N` every rank profiles at once, so the cores are as loaded (shared caches,
// memory bandwidth, clock) as during an N-rank run; rank 0 keeps the median over the ranks
// (exec/profile.h). With N = pipeline.ranks it then calibrates (exec/calibrate.h): a ping-pong
// between neighbour ranks, and short runs of the real executor whose per-rank op times and
// overhead the simulator applies on top of the layers.
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
#include "measured.h"
#include "scenario_runs.h"
#include "stagecraft/base/error.h"
#include "stagecraft/base/output_file.h"
#include "stagecraft/base/printable.h"
#include "stagecraft/exec/calibrate.h"
#include "stagecraft/exec/mpi_transport.h"
#include "stagecraft/exec/profile.h"
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

// The schedules whose runs calibrate: one per kind of op mix. 1F1B (F, B, one STEP per step),
// ZB-H1 (I and W apart), and PipeDream when the shape allows it (a STEP after every microbatch).
constexpr const char* kCalibrationSchedules[] = {"1f1b", "zb-h1", "pipedream"};

// Every rank's points as bytes, for gathering.
std::string PointsToBytes(const std::vector<exec::PingPongPoint>& points) {
  return std::string(reinterpret_cast<const char*>(points.data()), points.size() * sizeof(exec::PingPongPoint));
}
std::vector<exec::PingPongPoint> PointsFromBytes(const std::string& bytes) {
  std::vector<exec::PingPongPoint> points(bytes.size() / sizeof(exec::PingPongPoint));
  // A rank with no points sends nothing: an empty vector's data() may be null, not for memcpy.
  if (!points.empty()) std::memcpy(points.data(), bytes.data(), points.size() * sizeof(exec::PingPongPoint));
  return points;
}

// Ping-pong between every pair of neighbour ranks (r, r + 1), and (last, 0) when there are more
// than two (an interleaved pipeline wraps around); the fit over all pairs' points, and the
// overlap from a send_bytes transfer 0 -> 1. The result is rank 0's.
sim::P2pProfile CalibrateP2p(exec::Transport& transport, exec::Device& device, int64_t send_bytes) {
  const int n = transport.size();
  std::vector<int64_t> sizes = {4096, 16384, 65536, 262144, 1048576};
  if (send_bytes >= 4 && send_bytes % 4 == 0) sizes.push_back(send_bytes);
  std::vector<exec::PingPongPoint> mine;
  for (int a = 0; a < (n > 2 ? n : 1); ++a) {
    const std::vector<exec::PingPongPoint> points = exec::PingPong(transport, device, a, (a + 1) % n, sizes, 40);
    mine.insert(mine.end(), points.begin(), points.end());
  }
  const int64_t overlap_bytes = send_bytes >= 4 && send_bytes % 4 == 0 ? send_bytes : 65536;
  const int64_t wait = exec::WaitAfterCompute(transport, device, 0, 1, overlap_bytes, 1'000'000, 30);
  const std::vector<std::string> all_points = transport.Gather(PointsToBytes(mine), 0);
  const std::vector<std::string> waits = transport.Gather(std::to_string(wait), 0);
  if (transport.rank() != 0) return {};
  std::vector<exec::PingPongPoint> points;
  for (const std::string& bytes : all_points) {
    const auto p = PointsFromBytes(bytes);
    points.insert(points.end(), p.begin(), p.end());
  }
  sim::P2pProfile fit = exec::FitLatencyBandwidth(points);
  fit.overlap = exec::OverlapFraction(fit, overlap_bytes, std::stoll(waits.at(1)));
  return fit;
}

// What the calibration runs saw beyond the profile's fields, for the printout (rank 0's).
struct RunsReport {
  std::vector<exec::ScaleSums> per_step, per_microbatch;  // say which kinds were measured
  size_t waited = 0;                                      // transfers waited through
  int64_t waited_median_ns = 0;
};

// Runs the calibration schedules for `steps` steps on every rank and, on rank 0, sets the
// profile's per-rank scales (against its layers), overhead per op, op-time jitter and
// in-pipeline transfer bandwidth. Step 0 is left out.
// The pipeline of the calibration runs: the scenario's, `steps` steps, one stage per rank.
sim::PipelineSpec CalibrationPipeline(const sim::Scenario& sc, int steps) {
  sim::PipelineSpec pipeline = sc.pipeline;
  pipeline.steps = steps;
  pipeline.chunks = 1;
  return pipeline;
}

// The calibration schedules the shape allows.
std::vector<std::string> CalibrationSchedules(const sim::PipelineSpec& pipeline) {
  std::vector<std::string> names;
  for (const char* name : kCalibrationSchedules) {
    const schedules::GeneratorInfo* info = schedules::FindGenerator(name);
    if (info != nullptr && schedules::CheckParams(*info, sim::GeneratorParamsFor(pipeline, *info)).empty()) {
      names.emplace_back(name);
    }
  }
  return names;
}

RunsReport CalibrateRuns(
    const sim::Scenario& sc, const exec::TrainingConfig& base, int steps, exec::Device& device,
    exec::Transport& transport, sim::Profile* profile) {
  const int ranks = transport.size();
  std::vector<exec::ScaleSums> per_step(ranks), per_microbatch(ranks);
  int64_t overhead_sum = 0;
  std::vector<int64_t> rank_overhead_sum(static_cast<size_t>(ranks), 0);
  int runs = 0;
  std::vector<int> layers;  // the split the runs used, one stage per rank
  std::vector<int64_t> waited;  // transfers a receiver waited through, ns
  exec::JitterSums jitter;
  sim::PipelineSpec pipeline = CalibrationPipeline(sc, steps);
  const int64_t total = int64_t{pipeline.microbatches} * steps;
  exec::SetupRounds setup(transport);  // the first run's set-up ends the dataset's
  const exec::Dataset data = exec::MakeDataset(device, base, total, transport.rank() == 0,
                                               transport.rank() == ranks - 1, [&] { setup.Beat(); });
  for (const std::string& name : CalibrationSchedules(pipeline)) {
    pipeline.schedules = {name};
    const schedules::Schedule s = ScenarioSchedules(pipeline, {name}).at(0);
    exec::TrainingConfig config = base;
    config.layers_per_stage = sim::StageLayers(sc, s.stages());
    const exec::RankRun run = exec::RunRank(s, config, data, device, transport);
    const std::vector<std::string> all = transport.Gather(exec::SerializeRankRun(run), 0);
    if (transport.rank() != 0) continue;
    const schedules::RunRecord record = JoinRankRuns(s, all, 0);
    const bool every_microbatch = sim::UpdatesEveryMicrobatch(s);
    const sim::CostTable isolated = sim::CostsFromProfile(sc, *profile, s.shape, every_microbatch, false);
    layers = config.layers_per_stage;
    exec::AddScaleSums(s, record, isolated, steps > 1 ? 1 : 0, every_microbatch ? &per_microbatch : &per_step);
    overhead_sum += exec::OverheadPerOp(s, record);
    const std::vector<int64_t> by_rank = exec::OverheadPerOpByRank(s, record);
    for (int r = 0; r < ranks; ++r) rank_overhead_sum[r] += by_rank[r];
    exec::AddJitter(s, record, isolated, steps > 1 ? 1 : 0, &jitter);
    const std::vector<int64_t> w = exec::WaitedTransfers(s, record);
    waited.insert(waited.end(), w.begin(), w.end());
    ++runs;
  }
  RunsReport report;
  if (transport.rank() != 0 || runs == 0) return report;
  profile->op_overhead_ns = overhead_sum / runs;
  profile->op_time_cv = jitter.Cv();
  // The transfers as the pipeline saw them set the bandwidth their data moves at, when slower
  // than the ping-pong's (a sender's hot cache, a busy peer); the ping-pong's latency and
  // overlap stay. A median within the latency (small, eager messages) says nothing of it.
  if (profile->p2p && !waited.empty() && profile->send_bytes > 0) {
    const int64_t median = exec::Median(waited);
    if (median > profile->p2p->latency_ns) {
      const double seen =
          static_cast<double>(profile->send_bytes) * 1e9 / static_cast<double>(median - profile->p2p->latency_ns);
      if (seen < profile->p2p->bytes_per_s) profile->p2p->pipeline_bytes_per_s = seen;
    }
    report.waited = waited.size();
    report.waited_median_ns = median;
  }
  profile->ranks.resize(static_cast<size_t>(ranks));
  for (int r = 0; r < ranks; ++r) {
    sim::RankScale& k = profile->ranks[static_cast<size_t>(r)];
    k.layers = layers.at(static_cast<size_t>(r));
    k.op_overhead_ns = rank_overhead_sum[r] / runs;
    k.per_step = exec::ScaleOf(per_step[r], sim::OpScale{});
    k.per_microbatch = exec::ScaleOf(per_microbatch[r], k.per_step);
  }
  report.per_step = std::move(per_step);
  report.per_microbatch = std::move(per_microbatch);
  return report;
}

// A scale as the table shows it: "-" for a kind no calibration run had on that rank.
std::string ScaleText(double scale, const exec::ScaleSums* sums, int kind) {
  if (sums == nullptr || sums->isolated[kind] <= 0) return "-";
  return fmt::format("{:.3f}", scale);
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
      const sim::PipelineSpec calibration = CalibrationPipeline(sc, f.calibration_steps);
      CheckScheduleSizes(calibration, CalibrationSchedules(calibration), f.max_ops);
    }
  } catch (const std::exception& e) {
    error = e.what();
  }
  if (AnyRankFailed(error)) return 1;
  exec::ProcessRuntime runtime = StartRuntime(backend, sc);
  std::unique_ptr<exec::Device>& device = runtime.device;
  std::unique_ptr<exec::Transport>& transport = runtime.transport;
  transport->Barrier();
  // Each rank holds about layers / ranks layers in a run (interleaved or not): that share is
  // what passes through its caches, so layers are timed in groups of that size.
  const int share = (exec::NetworkLayers(config) + transport->size() - 1) / transport->size();
  sim::Profile profile = exec::ProfileLayers(config, *device, f.repeats, f.warmup, share);
  const std::vector<std::string> gathered = transport->Gather(exec::LayersToBytes(profile.layers), 0);
  if (rank == 0) {
    std::vector<std::vector<sim::LayerProfile>> per_rank;
    for (const std::string& bytes : gathered) per_rank.push_back(exec::LayersFromBytes(bytes));
    profile.layers = exec::MedianOverRanks(per_rank);
  }
  const bool calibrate = f.calibration_steps > 0 && transport->size() == sc.pipeline.ranks && sc.pipeline.ranks >= 2;
  RunsReport runs;
  try {
    if (calibrate) {
      const sim::P2pProfile fit = CalibrateP2p(*transport, *device, profile.send_bytes);
      if (rank == 0 && fit.bytes_per_s > 0) profile.p2p = fit;
      runs = CalibrateRuns(sc, config, f.calibration_steps, *device, *transport, &profile);
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
  std::fprintf(report, "profile of %s: %d %s, hidden %d, microbatch %d, median of %d runs on %d rank(s) at once -> %s\n",
              Printable(sc.name).c_str(), exec::NetworkLayers(config), config.gpt ? "blocks" : "layers",
              config.gpt ? config.gpt->hidden : config.model.hidden, config.microbatch_size, f.repeats,
              transport->size(), f.out_path.c_str());
  std::fprintf(report, "%-6s %12s %15s %16s %12s %14s\n", "layer", "forward", "backward_input", "backward_weight", "step",
              "activations");
  for (size_t l = 0; l < profile.layers.size(); ++l) {
    const sim::LayerProfile& m = profile.layers[l];
    std::fprintf(report, "%-6zu %12s %15s %16s %12s %14s\n", l, sim::FormatDuration(m.forward_ns).c_str(),
                sim::FormatDuration(m.backward_input_ns).c_str(), sim::FormatDuration(m.backward_weight_ns).c_str(),
                sim::FormatDuration(m.step_ns).c_str(), sim::FormatBytes(m.activation_bytes).c_str());
  }
  for (const auto& [name, piece] : {std::pair{"embed", profile.embedding}, std::pair{"head", profile.head}}) {
    if (!piece) continue;
    std::fprintf(report, "%-6s %12s %15s %16s %12s %14s\n", name, sim::FormatDuration(piece->forward_ns).c_str(),
                sim::FormatDuration(piece->backward_input_ns).c_str(),
                sim::FormatDuration(piece->backward_weight_ns).c_str(), sim::FormatDuration(piece->step_ns).c_str(),
                sim::FormatBytes(piece->activation_bytes).c_str());
  }
  std::fprintf(report, "input copy %s (first stage), loss %s (last stage), per forward\n",
              sim::FormatDuration(profile.input_copy_ns).c_str(), sim::FormatDuration(profile.loss_ns).c_str());
  if (!calibrate) {
    const char* why = f.calibration_steps == 0       ? "--calibration-steps 0"
                      : sc.pipeline.ranks < 2           ? "a one-rank pipeline has no neighbours to calibrate against"
                                                        : "run it on pipeline.ranks MPI ranks to calibrate";
    std::fprintf(report, "not calibrated (%s): the layers alone\n", why);
    return 0;
  }
  if (profile.p2p) {
    std::fprintf(report, "p2p: latency %s, bandwidth %.2f GB/s, %.0f%% of a %s transfer overlaps the receiver's compute\n",
                sim::FormatDuration(profile.p2p->latency_ns).c_str(), profile.p2p->bytes_per_s * 1e-9,
                100 * profile.p2p->overlap, sim::FormatBytes(profile.send_bytes).c_str());
    if (runs.waited > 0) {
      std::fprintf(report, "p2p in the pipeline: %zu transfers waited through, median %s", runs.waited,
                  sim::FormatDuration(runs.waited_median_ns).c_str());
      if (profile.p2p->pipeline_bytes_per_s > 0) {
        std::fprintf(report, ": %.2f GB/s (the simulator's data rate)\n", profile.p2p->pipeline_bytes_per_s * 1e-9);
      } else {
        std::fprintf(report, " (not slower than the ping-pong: its bandwidth stays)\n");
      }
    }
  } else {
    std::fprintf(report, "p2p: no bandwidth could be fitted (the larger messages were not slower); the topology's links stay\n");
  }
  std::string by_rank;
  for (size_t r = 0; r < profile.ranks.size(); ++r) {
    by_rank += fmt::format("{}rank {} {}", r == 0 ? " (" : ", ", r,
                           sim::FormatDuration(profile.ranks[r].op_overhead_ns.value_or(profile.op_overhead_ns)));
  }
  if (!by_rank.empty()) by_rank += ")";
  std::fprintf(report, "runtime overhead per op: %s%s\n", sim::FormatDuration(profile.op_overhead_ns).c_str(), by_rank.c_str());
  std::fprintf(report, "an op's time varies by %.1f%% (CV) from one run of it to the next\n", 100 * profile.op_time_cv);
  std::fprintf(report, "in-pipeline / isolated time, per rank (%d-step runs of %s):\n", f.calibration_steps,
              fmt::format("{}", fmt::join(kCalibrationSchedules, ", ")).c_str());
  std::fprintf(report, "%-5s %-14s %8s %8s %8s %8s %8s\n", "rank", "updates", "F", "B", "I", "W", "STEP");
  for (size_t r = 0; r < profile.ranks.size(); ++r) {
    const auto at = [r](const std::vector<exec::ScaleSums>& v) { return r < v.size() ? &v[r] : nullptr; };
    for (const auto& [what, k, measured] : {std::tuple{"per step", profile.ranks[r].per_step, at(runs.per_step)},
                                            std::tuple{"per microbatch", profile.ranks[r].per_microbatch,
                                                       at(runs.per_microbatch)}}) {
      std::fprintf(report, "%-5zu %-14s %8s %8s %8s %8s %8s\n", r, what, ScaleText(k.forward, measured, 0).c_str(),
                  ScaleText(k.backward, measured, 1).c_str(), ScaleText(k.backward_input, measured, 2).c_str(),
                  ScaleText(k.backward_weight, measured, 3).c_str(), ScaleText(k.step, measured, 4).c_str());
    }
  }
  std::fprintf(report, "(-: no calibration run had that op kind on that rank; its scale is per_step's, else 1)\n");
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
