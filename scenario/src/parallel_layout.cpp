// The parallel layout's device numbering (scenario.h ParallelLayout), the devices and memory of
// each pipeline rank, and the generator parameters a pipeline runs each schedule with.
#include <algorithm>
#include <cstdint>
#include <limits>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "stagecraft/scenario/scenario.h"
#include "stagecraft/schedules/weight_policy.h"

namespace stagecraft::sim {

int ParallelLayout::DeviceOf(int rank, int replica, int tensor) const {
  int64_t device = 0, stride = 1;
  for (const Axis axis : placement) {
    const auto [index, size] = axis == Axis::kTensor ? std::pair{tensor, tensor_parallel}
                               : axis == Axis::kData ? std::pair{replica, replicas()}
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
  if (replicas() <= 1) return devices;
  devices.resize(static_cast<size_t>(ranks));
  for (int r = 0; r < ranks; ++r) {
    for (int i = 0; i < replicas(); ++i) devices[r].push_back(DeviceOf(r, i));
  }
  return devices;
}

std::vector<int> ParallelLayout::ContextGroup(int rank) const {
  std::vector<int> devices;
  for (int c = 0; c < context_parallel; ++c) devices.push_back(DeviceOf(rank, c));
  return devices;
}

std::vector<std::vector<int>> ParallelLayout::ContextDevices() const {
  if (context_parallel <= 1) return {};
  std::vector<std::vector<int>> devices;
  for (int r = 0; r < ranks; ++r) devices.push_back(ContextGroup(r));
  return devices;
}

std::vector<std::vector<int>> ParallelLayout::ExpertDevices() const {
  if (expert_parallel <= 1) return {};
  std::vector<std::vector<int>> devices(static_cast<size_t>(ranks));
  for (int r = 0; r < ranks; ++r) {
    for (int k = 0; k < expert_parallel; ++k) devices[r].push_back(DeviceOf(r, k / tensor_parallel, k % tensor_parallel));
  }
  return devices;
}

std::vector<int> RankGroups(const Scenario& sc, int rank) {
  const ParallelLayout& p = sc.pipeline;
  const TopologySpec& t = sc.topology;
  if (!t.grouped()) return {0};
  std::vector<bool> runs(static_cast<size_t>(t.group_count()), false);
  for (int replica = 0; replica < p.replicas(); ++replica) {
    for (int tensor = 0; tensor < p.tensor_parallel; ++tensor) {
      runs[static_cast<size_t>(t.GroupOf(p.DeviceOf(rank, replica, tensor)))] = true;
    }
  }
  std::vector<int> groups;
  for (int g = 0; g < t.group_count(); ++g) {
    if (runs[static_cast<size_t>(g)]) groups.push_back(g);
  }
  return groups;
}

std::string RankDeviceNames(const Scenario& sc, int rank, std::string_view separator) {
  std::string names;
  for (const int g : RankGroups(sc, rank)) {
    if (!names.empty()) names += separator;
    names += sc.topology.GroupDevice(g).name;
  }
  return names;
}

int64_t RankDeviceMemory(const Scenario& sc, int rank) {
  int64_t bytes = std::numeric_limits<int64_t>::max();
  for (const int g : RankGroups(sc, rank)) bytes = std::min(bytes, sc.topology.GroupDevice(g).memory_bytes);
  return bytes;
}

std::vector<int64_t> RankDeviceMemories(const Scenario& sc) {
  std::vector<int64_t> bytes;
  for (int r = 0; r < sc.pipeline.ranks; ++r) bytes.push_back(RankDeviceMemory(sc, r));
  return bytes;
}

int64_t RankMemoryLimit(const Scenario& sc, int rank) {
  return sc.pipeline.memory_limit_bytes > 0 ? sc.pipeline.memory_limit_bytes : RankDeviceMemory(sc, rank);
}

int64_t TimeSliceNs(const Scenario& sc) { return sc.topology.GroupDevice(RankGroups(sc, 0).front()).time_slice_ns; }

schedules::GeneratorParams GeneratorParamsFor(const PipelineSpec& p, const schedules::GeneratorInfo& info) {
  const bool all = p.runs_all();
  schedules::GeneratorParams params;
  params.ranks = p.ranks;
  params.microbatches = p.microbatches;
  params.steps = p.steps;
  params.recompute = p.full_recompute();
  params.data_parallel = p.replicas();  // the REDUCE_GRAD's group: D x C
  params.chunks = info.interleaved ? schedules::ChunksFor(info, p.chunks) : 1;
  params.vertical_sync = p.vertical_sync && (!all || schedules::TakesVerticalSync(info.weights));
  params.zb_refine_nodes = p.zb_refine_nodes;
  return params;
}

}  // namespace stagecraft::sim
