// A model's per-layer profile, measured by `stagecraft profile` and read by the simulator as
// model.profile (DESIGN.md §3): plain scenario data, so the executor fills it without seeing
// the cost models. Its YAML format, reader and writer are in costs.h.
#pragma once

#include <cstdint>
#include <iterator>
#include <string>
#include <vector>

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
};

// Every field of LayerProfile by name, for per-field reductions (the median over ranks).
inline constexpr int64_t LayerProfile::*kLayerProfileFields[] = {
    &LayerProfile::forward_ns,       &LayerProfile::backward_input_ns, &LayerProfile::backward_weight_ns,
    &LayerProfile::step_ns,          &LayerProfile::version_copy_ns,   &LayerProfile::activation_bytes,
    &LayerProfile::weight_bytes,     &LayerProfile::w_stash_bytes,     &LayerProfile::grad_bytes,
    &LayerProfile::optimizer_bytes,
};
static_assert(sizeof(LayerProfile) == std::size(kLayerProfileFields) * sizeof(int64_t),
              "kLayerProfileFields names every field of LayerProfile");

struct Profile {
  std::string device;  // informational: where it was measured
  int microbatch_size = 1;
  int64_t send_bytes = 0;  // activation sent between stages per microbatch
  std::vector<LayerProfile> layers;  // in model order
};

}  // namespace stagecraft::sim
