// The run's memory timeline (exec/include/stagecraft/exec/memory_sampler.h) on the cpu device:
// samples only when the bytes held change, the fixed buffers left out, and a peak that sees what
// was held only between two samples but nothing from before the run's start.
#include <gtest/gtest.h>

#include <memory>
#include <vector>

#include "stagecraft/exec/cpu_device.h"
#include "stagecraft/exec/memory_sampler.h"

namespace stagecraft::exec {
namespace {

constexpr int64_t kFloat = sizeof(float);

TEST(MemorySampler, SamplesChangesBeyondTheFixedBuffersAndTheRunsPeak) {
  auto device = MakeCpuDevice();
  Buffer dataset(*device, 100);
  { Buffer before_the_run(*device, 5000); }  // a peak from before the start does not count
  MemorySampler sampler(*device);
  sampler.Start(100 * kFloat);
  schedules::RankRecord record;

  sampler.Sample(10, &record);
  Buffer held(*device, 40);
  sampler.Sample(20, &record);
  sampler.Sample(30, &record);  // no change: no sample
  { Buffer transient(*device, 1000); }  // held only inside an op
  sampler.Sample(40, &record);
  held.Reset();
  sampler.Sample(50, &record);

  const std::vector<schedules::MemorySample> want = {{10, 0}, {20, 40 * kFloat}, {50, 0}};
  EXPECT_EQ(record.memory, want);
  EXPECT_EQ(record.peak_memory_bytes, (40 + 1000) * kFloat);
}

}  // namespace
}  // namespace stagecraft::exec
