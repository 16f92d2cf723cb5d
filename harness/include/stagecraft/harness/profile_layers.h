// Measures what each layer of the executor's model costs on this machine and fills the
// simulator's profile (DESIGN.md §3 model.profile, scenario/profile.h): forward, input-gradient,
// weight-gradient and optimizer-step times, and the bytes the runtime really keeps per layer.
#pragma once

#include <string>
#include <vector>

#include "stagecraft/exec/device.h"
#include "stagecraft/exec/runtime.h"
#include "stagecraft/scenario/profile.h"

namespace stagecraft::harness {

// Times the layers in groups of `layers_per_group` (the share of the model one rank holds) the
// way a rank runs them: the group's forwards in order, its input gradients back down, then its
// weight gradients and optimizer steps, so the other layers' data passes through the caches
// between two ops of a layer as in a run. `warmup` untimed then `repeats` timed rounds; the
// median of each op. The device name is left to the caller.
sim::Profile ProfileLayers(const exec::TrainingConfig& config, exec::Device& device, int repeats, int warmup,
                           int layers_per_group);

// The layers' numbers as bytes, for gathering every rank's on one rank, and back (the ranks
// of one job run the same binary).
std::string LayersToBytes(const std::vector<sim::LayerProfile>& layers);
std::vector<sim::LayerProfile> LayersFromBytes(const std::string& bytes);

// Per layer and field (sim::kLayerProfileFields), the median over the ranks' layers.
std::vector<sim::LayerProfile> MedianOverRanks(const std::vector<std::vector<sim::LayerProfile>>& per_rank);

}  // namespace stagecraft::harness
