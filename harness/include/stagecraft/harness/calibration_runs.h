// What `stagecraft profile` measures beyond the layers, with the real executor on every rank
// of the pipeline: the point-to-point fit between neighbour ranks, the all-reduce fit over them
// all, and short runs of the calibration schedules whose per-rank op times, overhead per op,
// op-time jitter and in-pipeline transfer rate the profile keeps (docs/accuracy.md).
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "stagecraft/exec/backend.h"
#include "stagecraft/exec/device.h"
#include "stagecraft/exec/runtime.h"
#include "stagecraft/exec/transport.h"
#include "stagecraft/harness/calibrate.h"
#include "stagecraft/scenario/profile.h"
#include "stagecraft/scenario/scenario.h"

namespace stagecraft::harness {

// The pipeline of the calibration runs: the scenario's, `steps` steps, one stage per rank, and
// its replicas (each REDUCE_GRAD runs as in the job).
sim::PipelineSpec CalibrationPipeline(const sim::Scenario& scenario, int steps);

// The calibration schedules the shape allows, one per kind of op mix: 1F1B (F, B, one STEP per
// step), ZB-1p (I and W apart on every rank) and PipeDream (a STEP after every microbatch).
std::vector<std::string> CalibrationSchedules(const sim::PipelineSpec& pipeline);

// Ping-pong between every pair of neighbour ranks (r, r + 1), and (last, 0) when there are more
// than two (an interleaved pipeline wraps around); the fit over all pairs' points, and the
// overlap from a send_bytes transfer 0 -> 1. Every rank calls it; the result is rank 0's.
sim::P2pProfile CalibrateP2p(exec::Transport& transport, exec::Device& device, int64_t send_bytes);

// The all-reduce fit (FitAllReduce) at sizes from 4 KiB up to the gradients of `profile`'s
// whole model (the most one stage can hold): over `replicas` when the job runs them (each
// pipeline rank's group, as the runs use it), else over every rank of `transport`, as the
// data-parallel runtime makes the group on `backend` (MPI over host memory, NCCL over GPU
// memory). Collective over the job; the result is rank 0's of `transport`. None on one rank,
// and on cuda when the job's transport is not NCCL (no NCCL, or ranks sharing a GPU: the
// runtime could not run replicas either).
std::optional<sim::CollectiveFit> CalibrateAllReduce(exec::Backend backend, exec::Device& device,
                                                     exec::Transport& transport, const sim::Profile& profile,
                                                     std::chrono::nanoseconds deadline,
                                                     exec::ReplicaGroup* replicas = nullptr);

// What the calibration runs saw beyond the profile's fields, for the printout (rank 0's).
struct RunsReport {
  std::vector<ScaleSums> per_step, per_microbatch;  // say which kinds were measured
  size_t waited = 0;                                // transfers waited through
  int64_t waited_median_ns = 0;
  size_t reduces = 0;                               // REDUCE_GRADs timed (replicated layouts)
  bool deep_stash_left_out = false;  // GPipe's run skipped: predicted over the device's memory
  int64_t reduce_median_ns = 0;
};

// Runs the calibration schedules for `steps` steps on every rank and, on rank 0, sets the
// profile's per-rank scales (against its layers), overhead per op, op-time jitter and
// in-pipeline transfer bandwidth. Step 0 is left out. With `replicas` (the scenario's D > 1:
// `transport` is this replica's pipeline) every replica runs them, with their REDUCE_GRADs, and
// what those took sets the all-reduce fit's in-pipeline bus bandwidth when slower than its own.
RunsReport CalibrateRuns(const sim::Scenario& scenario, const exec::TrainingConfig& base, int steps,
                         exec::Device& device, exec::Transport& transport, sim::Profile* profile,
                         exec::ReplicaGroup* replicas = nullptr);

}  // namespace stagecraft::harness
