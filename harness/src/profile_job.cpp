// `stagecraft profile`'s workflow (profile_job.h).
#include "stagecraft/harness/profile_job.h"

#include <algorithm>
#include <string>
#include <vector>

#include "stagecraft/exec/mpi_transport.h"
#include "stagecraft/harness/calibrate.h"
#include "stagecraft/harness/predict.h"
#include "stagecraft/harness/profile_layers.h"

namespace stagecraft::harness {

int ProfileReplicas(const sim::Scenario& scenario, int64_t world) {
  const sim::PipelineSpec& p = scenario.pipeline;
  return p.data_parallel > 1 && world == int64_t{p.ranks} * p.data_parallel ? p.data_parallel : 1;
}

std::string NotCalibratedWhy(const sim::Scenario& scenario, const ProfileOptions& options, int ranks, int replicas) {
  const sim::PipelineSpec& p = scenario.pipeline;
  if (options.calibration_steps == 0) return "--calibration-steps 0";
  if (ranks == p.ranks && (p.ranks >= 2 || replicas > 1)) return "";
  if (p.ranks < 2 && replicas == 1) return "a one-rank pipeline without replicas has nothing to calibrate against";
  return "run it on pipeline.ranks x pipeline.data_parallel MPI ranks to calibrate";
}

sim::Profile ProfileLayersOnRanks(const sim::Scenario& scenario, const exec::TrainingConfig& config,
                                  exec::Device& device, exec::Transport& transport, const ProfileOptions& options) {
  const sim::PipelineSpec& p = scenario.pipeline;
  transport.Barrier();
  // Each rank holds about layers / pipeline.ranks layers in a run (interleaved or not, and in
  // every replica): that share is what passes through its caches, so layers are timed in groups
  // of that size.
  const int share = (exec::NetworkLayers(config) + p.ranks - 1) / p.ranks;
  // Ranks that share a device take turns: the ranks k*j + t in turn t, so that each layer's cost
  // is the device's own: the simulator shares the device between them itself (docs/scenario.md,
  // "Ranks that share a device").
  const int turns = std::max(1, std::min(p.ranks_per_device, transport.size()));
  sim::Profile profile;
  for (int turn = 0; turn < turns; ++turn) {
    if (transport.rank() % turns == turn) {
      profile = ProfileLayers(config, device, options.repeats, options.warmup, share);
    }
    if (turns > 1) transport.Barrier();
  }
  const std::vector<std::string> gathered = transport.Gather(LayersToBytes(profile.layers), 0);
  if (exec::MpiWorldRank() == 0) {  // the job's first rank writes the profile
    std::vector<std::vector<sim::LayerProfile>> per_rank;
    for (const std::string& bytes : gathered) per_rank.push_back(LayersFromBytes(bytes));
    profile.layers = MedianOverRanks(per_rank);
  }
  return profile;
}

RunsReport CalibrateProfile(const sim::Scenario& scenario, const exec::TrainingConfig& config, exec::Backend backend,
                            exec::ProcessRuntime& runtime, const ProfileOptions& options, sim::Profile* profile) {
  exec::Device& device = *runtime.device;
  exec::Transport& transport = *runtime.transport;
  if (transport.size() >= 2) {  // a one-rank pipeline (of replicas) has no neighbour
    const sim::P2pProfile fit = CalibrateP2p(transport, device, profile->send_bytes);
    if (exec::MpiWorldRank() == 0 && fit.bytes_per_s > 0) profile->p2p = fit;
  }
  profile->allreduce =
      CalibrateAllReduce(backend, device, transport, *profile, exec::kDefaultWaitDeadline, runtime.replicas.get());
  return CalibrateRuns(scenario, config, options.calibration_steps, device, transport, profile,
                       runtime.replicas.get());
}

}  // namespace stagecraft::harness
