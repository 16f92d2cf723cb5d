// Tests for exec/src/cpu_device.cpp's memory: Reserve faults pages in ahead, so the allocations
// after it take (almost) no page faults, where the same allocations without it take one per page;
// and blocks released between runs serve the next run without faulting again.
#include "stagecraft/exec/cpu_device.h"

#include <gtest/gtest.h>
#include <sys/resource.h>
#include <unistd.h>

#include <vector>

#include "stagecraft/exec/device.h"

namespace stagecraft::exec {
namespace {

int64_t MinorFaults() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  return usage.ru_minflt;
}

#if defined(__SANITIZE_ADDRESS__)
constexpr bool kSanitizedHeap = true;  // the sanitizer's allocator keeps its own pages
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
constexpr bool kSanitizedHeap = true;
#else
constexpr bool kSanitizedHeap = false;
#endif
#else
constexpr bool kSanitizedHeap = false;
#endif

constexpr int64_t kRunBytes = int64_t{24} << 20;

// A run's worth of buffers in the sizes an MLP run uses (activations, weights), every page
// written; the faults it took.
int64_t FaultsOfARun(Device& device, std::vector<Buffer>* keep) {
  const int64_t before = MinorFaults();
  const int64_t sizes[] = {32 << 10, 262400, 1 << 20};  // floats: 128 KiB, a layer, 4 MiB
  for (int64_t bytes = 0; bytes < kRunBytes;) {
    for (const int64_t floats : sizes) {
      Buffer& b = keep->emplace_back(device, floats);
      device.Fill(b.data(), 1.0f, floats);
      bytes += floats * static_cast<int64_t>(sizeof(float));
    }
  }
  return MinorFaults() - before;
}

TEST(CpuDeviceTest, ReserveFaultsThePagesInAheadOfTheRun) {
  if (kSanitizedHeap) GTEST_SKIP() << "the sanitizer's allocator does not use the heap Reserve prepares";
  const int64_t pages = kRunBytes / sysconf(_SC_PAGESIZE);
  auto device = MakeCpuDevice();
  // Without a reservation every fresh page of the run faults (the process is new: ctest runs
  // each test in a process of its own).
  std::vector<Buffer> first;
  const int64_t cold = FaultsOfARun(*device, &first);
  EXPECT_GT(cold, pages / 2) << "a run on fresh memory faults its pages in";
  // Released between runs, those pages serve the next run.
  first.clear();
  device->ReleaseCached();
  std::vector<Buffer> second;
  EXPECT_LT(FaultsOfARun(*device, &second), pages / 20) << "released blocks keep their pages";
  // Reserved ahead, a run on more memory than the process has held takes no fault either.
  device->Reserve(2 * kRunBytes + (int64_t{8} << 20));
  std::vector<Buffer> third;
  EXPECT_LT(FaultsOfARun(*device, &third), pages / 20) << "Reserve faulted the run's pages in";
}

TEST(CpuDeviceTest, ReserveIsAHintThatAllocatesNothing) {
  auto device = MakeCpuDevice();
  const int64_t before = device->system_allocations();
  device->Reserve(int64_t{16} << 20);
  device->Reserve(0);
  EXPECT_EQ(device->bytes_in_use(), 0);
  EXPECT_EQ(device->system_allocations(), before);
}

}  // namespace
}  // namespace stagecraft::exec
