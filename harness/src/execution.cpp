// Planning and running a scenario's schedules on this rank (see execution.h).
#include "stagecraft/base/format.h"
#include "stagecraft/harness/execution.h"

#include <unistd.h>

#include <algorithm>
#include <filesystem>

#include <fmt/format.h>

#include "stagecraft/base/error.h"
#include "stagecraft/exec/setup_rounds.h"
#include "stagecraft/harness/predict.h"
#include "stagecraft/schedules/metrics_json.h"
#include "stagecraft/sim/costs.h"
#include "stagecraft/sim/topology.h"
#include "stagecraft/scenario/units.h"

namespace stagecraft::harness {
namespace {

using schedules::Schedule;

// With the cpu backend the ranks of this node share its memory: the simulator's predicted peak
// of each schedule, times the ranks here, must fit in it.
void RefuseMoreThanThisNodeHolds(const ExecutionPlan& plan, int local_ranks) {
  if (plan.backend != exec::Backend::kCpu) return;
  const long pages = sysconf(_SC_PHYS_PAGES), page_bytes = sysconf(_SC_PAGE_SIZE);
  if (pages <= 0 || page_bytes <= 0) return;
  const int64_t node_bytes = static_cast<int64_t>(pages) * page_bytes;
  for (size_t k = 0; k < plan.schedules.size(); ++k) {
    const std::vector<int64_t>& peaks = plan.predicted_peak_bytes[k];
    const int64_t worst = *std::max_element(peaks.begin(), peaks.end());
    if (worst > node_bytes / std::max(local_ranks, 1)) {
      throw InputError(fmt::format(
          "{}: {} is predicted to hold {} on its busiest rank, and {} rank(s) share this node's {} of memory; "
          "nothing was run (fewer or smaller layers, fewer microbatches in flight, recompute or more nodes would fit)",
          plan.scenario.path, plan.names[k], FormatBytes(worst), local_ranks, FormatBytes(node_bytes)));
    }
  }
}

// The hard limits the scenario states (exec::DeviceMemory::SetLimit) on pipeline rank `rank`: its
// device's memory (split evenly between the ranks sharing it), and with a host, its node's host
// memory split evenly between the node's ranks; each beyond what the tier holds now (the
// executor's dataset, which a training job streams in and the simulator does not count).
void SetMemoryLimits(const sim::Scenario& sc, int rank, exec::DeviceMemory& memory) {
  using exec::MemoryTier;
  const int per_device = std::max(1, sc.pipeline.ranks_per_device);
  memory.SetLimit(MemoryTier::kDevice,
                  memory.bytes_in_use(MemoryTier::kDevice) + sim::RankDeviceMemory(sc, rank) / per_device);
  if (!sc.topology.host.stated() || sc.topology.explicit_graph()) return;
  const int node = sc.topology.NodeOf(sc.pipeline.DeviceOf(rank));
  const int64_t on_node = std::min<int64_t>(sc.pipeline.world(), int64_t{sc.topology.DevicesOnNode(node)} * per_device);
  memory.SetLimit(MemoryTier::kHost, memory.bytes_in_use(MemoryTier::kHost) +
                                         sc.topology.host.memory_bytes / std::max<int64_t>(1, on_node));
}

}  // namespace

ExecutionPlan PlanExecution(sim::Scenario scenario, exec::Backend backend, int world, int rank, int local_ranks,
                            int64_t max_ops) {
  ExecutionPlan plan;
  plan.scenario = std::move(scenario);
  plan.backend = backend;
  const sim::Scenario& sc = plan.scenario;
  plan.config = exec::TrainingConfigFor(sc);
  plan.layout = {sc.pipeline.ranks, plan.config.data_parallel};
  if (world != plan.layout.world()) {
    const std::string job = plan.layout.replicas > 1 ? fmt::format("pipeline.ranks {} x pipeline.data_parallel {} = {}",
                                                                   sc.pipeline.ranks, plan.layout.replicas,
                                                                   plan.layout.world())
                                                     : fmt::format("pipeline.ranks is {}", sc.pipeline.ranks);
    throw InputError(fmt::format("{}: {} but the MPI job has {} process(es); run it as `mpirun -np {} stagecraft "
                                 "execute {}`",
                                 sc.path, job, world, plan.layout.world(), sc.path));
  }
  plan.names = ScenarioScheduleNames(sc, rank == 0);
  const bool spills = sc.pipeline.offload.weights != sim::WeightsOffload::kNone ||
                      std::find(plan.names.begin(), plan.names.end(), "spilled") != plan.names.end();
  if (spills && plan.layout.replicas > 1) {
    throw InputError(fmt::format("{}: pipeline.offload.weights: spilled weights are executed with one replica "
                                 "(pipeline.data_parallel 1): a REDUCE_GRAD would find its gradients on the host",
                                 sc.path));
  }
  plan.replica = plan.layout.ReplicaOf(rank);
  rank = plan.layout.PipelineRankOf(rank);  // from here on, the rank in this replica's pipeline
  CheckScheduleSizes(sc.pipeline, plan.names, max_ops);
  plan.schedules = ScenarioSchedules(sc, plan.names);
  // This rank feeds inputs if it holds stage 0 and scores targets if it holds the last stage,
  // in any of the schedules (placement decides: under V the last stage is on rank 0).
  for (const Schedule& s : plan.schedules) {
    plan.feeds |= s.shape.RankOf(0) == rank;
    plan.scores |= s.shape.RankOf(s.stages() - 1) == rank;
    plan.layers.push_back(sim::StageLayers(sc, s.shape));
  }
  // A run the simulator predicts will not fit is refused here, before any rank allocates.
  const sim::Topology topo(sc.topology);
  std::vector<Prediction> predictions;
  for (const Schedule& s : plan.schedules) predictions.push_back(Predict(sc, topo, s));
  RefusePredictedOom(sc, predictions);
  for (const Prediction& p : predictions) {
    const int ranks = sc.pipeline.ranks;
    std::vector<int64_t>& peaks = plan.predicted_peak_bytes.emplace_back(static_cast<size_t>(ranks), 0);
    for (const auto& r : p.metrics.ranks_detail) {
      if (r.rank >= 0 && r.rank < ranks) peaks[static_cast<size_t>(r.rank)] = r.peak_memory_bytes;
    }
  }
  RefuseMoreThanThisNodeHolds(plan, local_ranks);
  return plan;
}

std::vector<MeasuredSchedule> RunSchedules(const ExecutionPlan& plan, const exec::RunHooks& base_hooks,
                                           exec::Device& device, exec::Transport& transport,
                                           const RunReporting& reporting, exec::ReplicaGroup* replicas) {
  const sim::Scenario& sc = plan.scenario;
  const int rank = transport.rank();
  std::vector<MeasuredSchedule> measured;
  exec::SetupRounds setup(transport);
  const int64_t total = static_cast<int64_t>(sc.pipeline.microbatches) * sc.pipeline.steps;
  const exec::Dataset data =
      exec::MakeDataset(device, plan.config, total, plan.feeds, plan.scores, [&] { setup.Beat(); }, plan.replica);
  SetMemoryLimits(sc, rank, device.memory());
  ProgressFile disabled("", {}, 0);
  ProgressFile& progress = reporting.progress != nullptr ? *reporting.progress : disabled;
  if (progress.enabled() && rank == 0) {
    std::error_code ignored;
    std::filesystem::remove(progress.path(), ignored);  // an older run's, not this one's
  }
  for (size_t k = 0; k < plan.schedules.size(); ++k) {
    const Schedule& s = plan.schedules[k];
    exec::TrainingConfig config = plan.config;
    config.layers_per_stage = plan.layers[k];
    exec::RunHooks hooks = base_hooks;
    const exec::RunHooks::StepFn print = reporting.step_printer ? reporting.step_printer(s, config) : nullptr;
    progress.Start(s.name, s.steps);
    hooks.on_step = [&progress, print, last_end = int64_t{0}](const exec::StepProgress& p) mutable {
      if (print) print(p);
      if (progress.enabled()) progress.Step(p, p.end_ns - last_end);
      last_end = p.end_ns;
    };
    // What the simulator predicts this rank will hold, faulted in before the clock starts: a
    // run's first step would otherwise pay for fresh pages that no later step pays for.
    device.memory().Reserve(plan.predicted_peak_bytes[k].at(static_cast<size_t>(rank)));
    const exec::RankRun run = exec::RunRank(s, config, data, device, transport, hooks, replicas);
    device.memory().ReleaseCached();  // the next schedule's buffers are other sizes
    const std::vector<std::string> all =
        exec::NamingTimeout([&] { return transport.Gather(exec::SerializeRankRun(run), 0); },
                            [&] { return "gathering the measurements of " + s.name; });
    if (rank == 0) measured.push_back(Measure(s, sc, all));
    if (!reporting.share_done) continue;
    // Every rank learns what is complete, for the progress file.
    std::string done = rank == 0 ? schedules::MetricsFileToJson(MeasuredFile(sc, device.Name(), measured)) : "";
    exec::NamingTimeout([&] { transport.Broadcast(&done, 0); },
                        [&] { return "sharing the measurements of " + s.name; });
    if (progress.enabled()) {
      progress.SetDone(done);
      if (rank == 0) progress.Write();
    }
  }
  return measured;
}

}  // namespace stagecraft::harness
