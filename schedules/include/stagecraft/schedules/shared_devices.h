// The devices several pipeline ranks share (pipeline.ranks_per_device > 1), read off a rank ->
// device list (sim::PipelineSpec::RankDevices, SimConfig::rank_devices): the simulator's compute
// streams time-slice them and its memory model sums them; a measured record's memory is summed
// by them (SumSharedDeviceMemory), and calibration and replay undo their time-slicing
// (harness::WithoutSharing).
#pragma once

#include <cstddef>
#include <map>
#include <utility>
#include <vector>

namespace stagecraft::schedules {

struct SharedDevices {
  std::vector<int> of_rank;             // [rank]: index in `ranks`, -1 when the rank has its device alone
  std::vector<std::vector<int>> ranks;  // per shared device, its ranks in increasing order
};

// `rank_devices[r]` is rank r's device (empty: a device each, nothing shared); entries past
// `ranks` are not read.
inline SharedDevices FindSharedDevices(const std::vector<int>& rank_devices, int ranks) {
  SharedDevices shared;
  shared.of_rank.assign(static_cast<size_t>(ranks), -1);
  std::map<int, std::vector<int>> ranks_of;
  for (size_t r = 0; r < rank_devices.size() && r < static_cast<size_t>(ranks); ++r) ranks_of[rank_devices[r]].push_back(static_cast<int>(r));
  for (auto& [device, on_it] : ranks_of) {
    if (on_it.size() < 2) continue;
    for (int r : on_it) shared.of_rank[static_cast<size_t>(r)] = static_cast<int>(shared.ranks.size());
    shared.ranks.push_back(std::move(on_it));
  }
  return shared;
}

}  // namespace stagecraft::schedules
