// Tests for the cpu device's parts (exec/src/cpu_memory.cpp, cpu_streams.cpp, cpu_clock.cpp):
// memory tiers accounted apart, copies between every pair of tiers (done before the call
// returns), host-tier buffers; streams that are always idle; stamps on the steady clock.
#include <gtest/gtest.h>

#include <vector>

#include "stagecraft/exec/cpu_device.h"
#include "stagecraft/exec/device.h"

namespace stagecraft::exec {
namespace {

TEST(CpuMemoryTest, TiersAreAccountedApart) {
  auto device = MakeCpuDevice();
  DeviceMemory& memory = device->memory();
  float* on_device = memory.Allocate(10);
  float* on_host = memory.Allocate(6, MemoryTier::kHost);
  EXPECT_EQ(memory.bytes_in_use(), 40);
  EXPECT_EQ(memory.bytes_in_use(MemoryTier::kDevice), 40);
  EXPECT_EQ(memory.bytes_in_use(MemoryTier::kHost), 24);
  EXPECT_EQ(memory.system_allocations(), 1);  // host-tier blocks are not the device's pool
  memory.Free(on_host, 6, MemoryTier::kHost);
  EXPECT_EQ(memory.bytes_in_use(MemoryTier::kHost), 0);
  EXPECT_EQ(memory.peak_bytes(MemoryTier::kHost), 24);
  EXPECT_EQ(memory.bytes_in_use(), 40);
  memory.Free(on_device, 10);
  EXPECT_EQ(memory.bytes_in_use(), 0);
  EXPECT_EQ(memory.peak_bytes(), 40);
  memory.ResetPeak();
  EXPECT_EQ(memory.peak_bytes(), 0);
  EXPECT_EQ(memory.peak_bytes(MemoryTier::kHost), 0);
}

TEST(CpuMemoryTest, HostTierBufferFreesThroughItsTier) {
  auto device = MakeCpuDevice();
  {
    Buffer host(*device, 8, MemoryTier::kHost);
    EXPECT_EQ(host.tier(), MemoryTier::kHost);
    EXPECT_EQ(device->memory().bytes_in_use(MemoryTier::kHost), 32);
    EXPECT_EQ(device->memory().bytes_in_use(), 0);
    Buffer moved = std::move(host);
    EXPECT_EQ(moved.tier(), MemoryTier::kHost);
  }
  EXPECT_EQ(device->memory().bytes_in_use(MemoryTier::kHost), 0);
}

// Offload and reload: device → host on the to-host stream, host → device on the to-device
// stream, and the two same-tier copies; each has landed when the call returns.
TEST(CpuMemoryTest, CopiesBetweenEveryPairOfTiers) {
  auto device = MakeCpuDevice();
  DeviceMemory& memory = device->memory();
  Buffer a(*device, 4), b(*device, 4);
  Buffer h1(*device, 4, MemoryTier::kHost), h2(*device, 4, MemoryTier::kHost);
  const std::vector<float> values = {1.5f, -2.0f, 3.25f, 0.0f};
  memory.Upload(a.data(), values.data(), 4);
  memory.CopyAsync(h1.data(), MemoryTier::kHost, a.data(), MemoryTier::kDevice, 4, StreamKind::kToHost);
  EXPECT_EQ(std::vector<float>(h1.data(), h1.data() + 4), values);
  memory.CopyAsync(h2.data(), MemoryTier::kHost, h1.data(), MemoryTier::kHost, 4, StreamKind::kToHost);
  memory.CopyAsync(b.data(), MemoryTier::kDevice, h2.data(), MemoryTier::kHost, 4, StreamKind::kToDevice);
  std::vector<float> back(4);
  memory.Download(back.data(), b.data(), 4);
  EXPECT_EQ(back, values);
  memory.Fill(a.data(), 7.0f, 4);
  memory.CopyAsync(b.data(), MemoryTier::kDevice, a.data(), MemoryTier::kDevice, 2, StreamKind::kCompute);
  memory.Download(back.data(), b.data(), 4);
  EXPECT_EQ(back, (std::vector<float>{7.0f, 7.0f, 3.25f, 0.0f}));
}

TEST(CpuStreamsTest, EveryStreamIsIdleAndOrdered) {
  auto device = MakeCpuDevice();
  DeviceStreams& streams = device->streams();
  for (StreamKind kind : {StreamKind::kCompute, StreamKind::kToHost, StreamKind::kToDevice}) {
    EXPECT_TRUE(streams.Idle(kind));
    EXPECT_EQ(streams.Native(kind), nullptr);
    streams.Synchronize(kind);
  }
  streams.OrderAfter(StreamKind::kCompute, StreamKind::kToDevice);
  EXPECT_TRUE(streams.Idle(StreamKind::kCompute));
}

TEST(CpuClockTest, StampsCountFromZeroAndReadTheSteadyClock) {
  auto device = MakeCpuDevice();
  DeviceClock& clock = device->clock();
  const int64_t before = clock.NowNs();
  EXPECT_EQ(clock.Stamp(), 0);
  EXPECT_EQ(clock.Stamp(), 1);
  EXPECT_TRUE(clock.Reached(1));
  EXPECT_GE(clock.StampNs(0), before);
  EXPECT_GE(clock.StampNs(1), clock.StampNs(0));
  EXPECT_LE(clock.StampNs(1), clock.NowNs());
  clock.ClearStamps();
  EXPECT_EQ(clock.Stamp(), 0);
}

}  // namespace
}  // namespace stagecraft::exec
