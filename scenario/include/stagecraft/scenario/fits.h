// What a profile measures beyond its layers' times, as the fits the simulator's cost models read
// (sim/cost_table.h, sim/stash.h): the transfers' and the all-reduce's fits, and how a rank's op
// times grow with the activations it holds (the stash's slopes, described in sim/stash.h).
#pragma once

#include <cstdint>
#include <utility>

namespace stagecraft::sim {

// Point-to-point transfers between neighbour ranks as placed, measured (a ping-pong fit): one-way
// time latency + bytes / bandwidth; `overlap` is the part of the bytes / bandwidth that proceeds
// while the receiver computes (1: all of it, as a DMA engine; a shared-memory MPI copies most
// of a large message inside the receiver's wait, when it reaches it).
struct P2pFit {
  int64_t latency_ns = 0;
  double bytes_per_s = 0;
  double overlap = 1;
  // What transfers showed inside the calibration runs, where a receiver that waited through a
  // whole transfer saw latency + bytes / this (the copy from a sender's hot cache, not the
  // ping-pong's warm buffer); 0: not measured.
  double pipeline_bytes_per_s = 0;

  // The bandwidth a transfer's data moves at in a pipeline.
  double DataBytesPerS() const { return pipeline_bytes_per_s > 0 ? pipeline_bytes_per_s : bytes_per_s; }
};

// The data-parallel all-reduce as measured (`stagecraft profile`, over `ranks` ranks), in the ring
// form (collectives.h AllReduceNs): over n ranks, 2(n-1) steps of latency_ns each and
// 2(n-1)/n·bytes at bus_bytes_per_s, nccl-tests' bus bandwidth. It times a REDUCE_GRAD as a whole,
// as a ping-pong fit times a transfer, for n = the replicas, whatever `ranks` it was measured on.
struct CollectiveFit {
  int64_t latency_ns = 0;
  double bus_bytes_per_s = 0;
  int ranks = 0;
  // What the REDUCE_GRADs of the calibration runs of a replicated layout showed, when slower
  // than the back-to-back fit's (gradients gone cold between steps, a replica a little behind);
  // the latency stays. 0: not measured. The bandwidth a REDUCE_GRAD's bytes move at.
  double pipeline_bus_bytes_per_s = 0;
  double DataBusBytesPerS() const { return pipeline_bus_bytes_per_s > 0 ? pipeline_bus_bytes_per_s : bus_bytes_per_s; }
};

struct StashSlope {
  double at = 0;     // the mean depth of this kind's ops in the shallow calibration runs
  double slope = 0;  // relative time per microbatch of depth beyond `at`
  // The calibration's own, not in the profile file: the slope the runs measured and two
  // standard errors of it (per microbatch, from the spread of each op's measured / isolated).
  // `slope` is the measured one when it exceeds that noise, else 0: an effect the runs cannot
  // tell from their noise is not applied.
  double measured_slope = 0;
  double noise = 0;
  friend bool operator==(const StashSlope&, const StashSlope&) = default;
};

struct StashScale {
  double deep = 0;  // the deepest the calibration measured; deeper ops are timed as at `deep`
  StashSlope forward, backward, backward_input, backward_weight;
  friend bool operator==(const StashScale&, const StashScale&) = default;
};

// Every kind's field with its profile key, in op-kind order F, B, I, W (the calibration's sums).
inline constexpr std::pair<const char*, StashSlope StashScale::*> kStashFields[] = {
    {"forward", &StashScale::forward},
    {"backward", &StashScale::backward},
    {"backward_input", &StashScale::backward_input},
    {"backward_weight", &StashScale::backward_weight},
};

}  // namespace stagecraft::sim
