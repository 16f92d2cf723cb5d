// `stagecraft profile`'s workflow on every rank of an MPI job: the layers timed on each rank at
// once (in turns on a shared device) and their median over the ranks, then, on a job of
// pipeline.ranks x pipeline.data_parallel ranks, the calibration (calibration_runs.h); and the
// report rank 0 prints of both (docs/accuracy.md).
#pragma once

#include <cstdint>
#include <string>

#include "stagecraft/exec/backend.h"
#include "stagecraft/exec/runtime.h"
#include "stagecraft/harness/calibration_runs.h"
#include "stagecraft/scenario/profile.h"
#include "stagecraft/scenario/scenario.h"

namespace stagecraft::harness {

struct ProfileOptions {
  int repeats = 20;            // timed runs per layer (the median is kept)
  int warmup = 3;              // untimed runs per layer first
  int calibration_steps = 10;  // steps of each calibration run; 0: the layers only
};

// The replicas a profile job of `world` ranks runs as `execute` does: pipeline.data_parallel
// when the job is pipeline.ranks x data_parallel ranks (the layers are then timed with every
// replica computing at once and the calibration runs are the job's own), else 1.
int ProfileReplicas(const sim::Scenario& scenario, int64_t world);

// Why a job of `ranks` pipeline ranks (this replica's transport) with `replicas` is not
// calibrated, or empty when it is.
std::string NotCalibratedWhy(const sim::Scenario& scenario, const ProfileOptions& options, int ranks, int replicas);

// Every rank times its share of the layers (about layers / pipeline.ranks, what passes through
// its caches in a run); ranks that share a device (pipeline.ranks_per_device k) time them in k
// turns, so that each layer's cost is the device's own. Collective; the job's first rank's result
// holds the median over its pipeline's ranks, the others' their own.
sim::Profile ProfileLayersOnRanks(const sim::Scenario& scenario, const exec::TrainingConfig& config,
                                  exec::Device& device, exec::Transport& transport, const ProfileOptions& options);

// The calibration on every rank (NotCalibratedWhy empty): the p2p fit between neighbours, the
// all-reduce fit and the calibration runs, into `profile` (the job's first rank's). Collective; throws what a
// step throws.
RunsReport CalibrateProfile(const sim::Scenario& scenario, const exec::TrainingConfig& config, exec::Backend backend,
                            exec::ProcessRuntime& runtime, const ProfileOptions& options, sim::Profile* profile);

// The report: the layers' table (what was timed, each layer's median times and activations),
// and the calibration's (the p2p fit, the runtime's overhead and noise, each rank's scales and
// stash slopes).
std::string ProfileLayersText(const sim::Profile& profile, const sim::Scenario& scenario,
                              const exec::TrainingConfig& config, const ProfileOptions& options, int ranks,
                              const std::string& out_path);
std::string CalibrationText(const sim::Profile& profile, const RunsReport& runs, const sim::Scenario& scenario,
                            const ProfileOptions& options);

}  // namespace stagecraft::harness
