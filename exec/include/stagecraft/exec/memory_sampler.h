// The memory timeline of a run: what the device holds after each op beyond the run's fixed
// buffers (dataset, losses), sampled when it changes, and the device's high-water mark, which
// also sees what an op holds only while it runs (a STEP's new version before the old one goes).
#pragma once

#include <algorithm>
#include <cstdint>

#include "stagecraft/exec/device.h"
#include "stagecraft/schedules/run_record.h"

namespace stagecraft::exec {

class MemorySampler {
 public:
  explicit MemorySampler(Device& device) : device_(device) {}

  // The run starts: `base_bytes` held by the fixed buffers are left out, and the device's peak
  // starts over from what it holds now.
  void Start(int64_t base_bytes) {
    base_bytes_ = base_bytes;
    device_.memory().ResetPeak();
  }
  // After an op, at `now_ns` since the run's start: a sample in `record` when the bytes held
  // changed, and the peak so far.
  void Sample(int64_t now_ns, schedules::RankRecord* record) {
    const int64_t bytes = device_.memory().bytes_in_use() - base_bytes_;
    if (record->memory.empty() || record->memory.back().bytes != bytes) record->memory.push_back({now_ns, bytes});
    record->peak_memory_bytes = std::max(record->peak_memory_bytes, device_.memory().peak_bytes() - base_bytes_);
  }

 private:
  Device& device_;
  int64_t base_bytes_ = 0;
};

}  // namespace stagecraft::exec
