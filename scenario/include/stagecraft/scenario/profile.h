// A model's per-layer profile, measured by `stagecraft profile` and read by the simulator as
// model.profile (DESIGN.md §3): plain scenario data, so the executor fills it without seeing
// the cost models. Its YAML format, reader and writer are in profile_yaml.h.
#pragma once

#include <cstdint>
#include <iterator>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "stagecraft/scenario/fits.h"

namespace stagecraft::sim {

struct LayerProfile {
  int64_t forward_ns = 0;
  int64_t backward_input_ns = 0;   // I: input gradient (a full B costs I + W)
  int64_t backward_weight_ns = 0;  // W: weight gradient
  int64_t step_ns = 0;             // optimizer update of the layer's parameters
  int64_t version_copy_ns = 0;     // copying the parameters, for a STEP that keeps the old version
  int64_t activation_bytes = 0;    // kept from F to its B / I
  int64_t weight_bytes = 0;        // one version of the layer's parameters
  int64_t w_stash_bytes = 0;       // kept from I to W
  int64_t grad_bytes = 0;
  int64_t optimizer_bytes = 0;     // optimizer state
  int64_t workspace_bytes = 0;     // the most an op of the layer holds while it runs, beyond what it keeps
  // PipeMare's discrepancy correction over the layer's parameters (exec/weight_store.h): the two
  // axpy's around a backward, and the velocity's update at a STEP (a scal and two axpy's).
  int64_t correction_ns = 0;
  int64_t velocity_ns = 0;
};

// Every field of LayerProfile by name, for per-field reductions (the median over ranks).
inline constexpr int64_t LayerProfile::*kLayerProfileFields[] = {
    &LayerProfile::forward_ns,       &LayerProfile::backward_input_ns, &LayerProfile::backward_weight_ns,
    &LayerProfile::step_ns,          &LayerProfile::version_copy_ns,   &LayerProfile::activation_bytes,
    &LayerProfile::weight_bytes,     &LayerProfile::w_stash_bytes,     &LayerProfile::grad_bytes,
    &LayerProfile::optimizer_bytes,  &LayerProfile::workspace_bytes,   &LayerProfile::correction_ns,
    &LayerProfile::velocity_ns,
};
static_assert(sizeof(LayerProfile) == std::size(kLayerProfileFields) * sizeof(int64_t),
              "kLayerProfileFields names every field of LayerProfile");

// How much longer (or shorter) each op kind ran inside a pipeline on one rank than the sum of
// its layers measured in isolation: measured / isolated, over a calibration run's ops. It
// carries over to those layers wherever a schedule places them: what the rank's place in the
// pipeline does to them (its caches, its neighbours, the machine's load at the time).
struct OpScale {
  double forward = 1, backward = 1, backward_input = 1, backward_weight = 1, step = 1;
};

// Every field of OpScale with its profile key, in op-kind order F, B, I, W, STEP (the order the
// calibration's per-kind sums use).
inline constexpr std::pair<const char*, double OpScale::*> kOpScaleFields[] = {
    {"forward", &OpScale::forward},
    {"backward", &OpScale::backward},
    {"backward_input", &OpScale::backward_input},
    {"backward_weight", &OpScale::backward_weight},
    {"step", &OpScale::step},
};
static_assert(sizeof(OpScale) == std::size(kOpScaleFields) * sizeof(double),
              "kOpScaleFields names every field of OpScale");

// One rank's scales in the two ways a schedule can update weights: once per step (flush
// schedules, 2BW) or after every microbatch (PipeDream), when the optimizer's traffic between
// two microbatches evicts the layers from the caches.
struct RankScale {
  int layers = 0;  // consecutive layers the rank held in the calibration runs (0: not recorded)
  std::optional<int64_t> op_overhead_ns;  // the rank's runtime work per op (else the profile's)
  OpScale per_step;
  OpScale per_microbatch;
  // How the rank's op times grow with the activations it holds (fits.h, sim/stash.h); absent: they do not.
  std::optional<StashScale> stash;
};

// The ping-pong fit of the profile's transfers (fits.h), by its profile name.
using P2pProfile = P2pFit;

struct Profile {
  std::string device;  // informational: where it was measured
  int microbatch_size = 1;
  int64_t send_bytes = 0;  // activation sent between stages per microbatch
  std::vector<LayerProfile> layers;  // in model order
  // The transformer's pieces beside its blocks, measured like a layer: the token and position
  // embeddings, on the first stage, and the final LayerNorm with the LM head, on the last
  // (absent for the MLP). Their F, I, W, STEP and bytes join those stages' layers.
  std::optional<LayerProfile> embedding;
  std::optional<LayerProfile> head;
  // Measured beyond the layers (all optional, 0 / empty when absent):
  int64_t input_copy_ns = 0;   // the first stage's copy of its input microbatch, per F
  int64_t loss_ns = 0;         // the last stage's loss and its gradient, per F
  int64_t op_overhead_ns = 0;  // the runtime's own work per op of a rank's list
  double op_time_cv = 0;       // spread of one op's time between its runs (coefficient of variation)
  std::optional<P2pProfile> p2p;
  std::optional<CollectiveFit> allreduce;  // the all-reduce over the profile job's ranks (fits.h)
  // By rank of the calibration runs (one stage per rank): the scales of the layers that rank
  // held; empty: every scale 1.
  std::vector<RankScale> ranks;
};

}  // namespace stagecraft::sim
