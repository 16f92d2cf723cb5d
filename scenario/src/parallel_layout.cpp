// The parallel layout's device numbering (scenario.h ParallelLayout) and the generator
// parameters a pipeline runs each schedule with.
#include <cstdint>
#include <utility>
#include <vector>

#include "stagecraft/scenario/scenario.h"

namespace stagecraft::sim {

int ParallelLayout::DeviceOf(int rank, int replica, int tensor) const {
  int64_t device = 0, stride = 1;
  for (const Axis axis : placement) {
    const auto [index, size] = axis == Axis::kTensor ? std::pair{tensor, tensor_parallel}
                               : axis == Axis::kData ? std::pair{replica, data_parallel}
                                                     : std::pair{rank / ranks_per_device, pipeline_devices()};
    device += index * stride;
    stride *= size;
  }
  return static_cast<int>(device);
}

std::vector<int> ParallelLayout::RankDevices() const {
  std::vector<int> devices;
  if (world() == ranks && ranks_per_device == 1) return devices;
  for (int r = 0; r < ranks; ++r) devices.push_back(DeviceOf(r));
  return devices;
}

std::vector<std::vector<int>> ParallelLayout::ReplicaDevices() const {
  std::vector<std::vector<int>> devices;
  if (data_parallel <= 1) return devices;
  devices.resize(static_cast<size_t>(ranks));
  for (int r = 0; r < ranks; ++r) {
    for (int i = 0; i < data_parallel; ++i) devices[r].push_back(DeviceOf(r, i));
  }
  return devices;
}

schedules::GeneratorParams GeneratorParamsFor(const PipelineSpec& p, const schedules::GeneratorInfo& info) {
  const bool all = p.runs_all();
  schedules::GeneratorParams params;
  params.ranks = p.ranks;
  params.microbatches = p.microbatches;
  params.steps = p.steps;
  params.recompute = p.full_recompute();
  params.data_parallel = p.data_parallel;
  params.chunks = info.interleaved ? schedules::ChunksFor(info, p.chunks) : 1;
  params.vertical_sync = p.vertical_sync && (!all || info.weights == schedules::WeightPolicy::kStash);
  params.zb_refine_nodes = p.zb_refine_nodes;
  return params;
}

}  // namespace stagecraft::sim
