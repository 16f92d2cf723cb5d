// Measures what each layer of the executor's model costs on this machine (the numbers the
// simulator needs, DESIGN.md §3 model.profile): forward, input-gradient, weight-gradient and
// optimizer-step times, and the bytes the runtime really keeps per layer.
#pragma once

#include <cstdint>
#include <vector>

#include "stagecraft/exec/device.h"
#include "stagecraft/exec/runtime.h"

namespace stagecraft::exec {

// Plain int64 fields only: ranks exchange these as raw bytes.
struct LayerMeasurement {
  int64_t forward_ns = 0;          // median over the repeats
  int64_t backward_input_ns = 0;   // I: input gradient (a full B costs I + W)
  int64_t backward_weight_ns = 0;  // W: weight gradient
  int64_t step_ns = 0;             // optimizer update of the layer's parameters
  int64_t activation_bytes = 0;    // kept from F to its B / I
  int64_t w_stash_bytes = 0;       // kept from I to W
  int64_t weight_bytes = 0;        // one version of the layer's parameters
  int64_t optimizer_bytes = 0;     // optimizer state
  int64_t send_bytes = 0;          // the layer's output, what a stage boundary sends
};

// Runs F -> I -> W -> optimizer step on one layer at a time, `warmup` untimed then `repeats`
// timed rounds each, and keeps the median of every phase.
std::vector<LayerMeasurement> ProfileLayers(const TrainingConfig& config, Device& device, int repeats, int warmup);

}  // namespace stagecraft::exec
