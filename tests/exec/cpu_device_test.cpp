// Tests for exec/src/cpu_device.cpp's memory: Reserve faults pages in ahead, so the allocations
// after it take (almost) no page faults, where the same allocations without it take one per page;
// and blocks released between runs serve the next run without faulting again. And the core a
// rank that shares a device is bound to.
#include "stagecraft/exec/cpu_device.h"

#include <gtest/gtest.h>
#include <sched.h>
#include <sys/resource.h>
#include <unistd.h>

#include <stdexcept>
#include <string>
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
      device.memory().Fill(b.data(), 1.0f, floats);
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
  device->memory().ReleaseCached();
  std::vector<Buffer> second;
  EXPECT_LT(FaultsOfARun(*device, &second), pages / 20) << "released blocks keep their pages";
  // Reserved ahead, a run on more memory than the process has held takes no fault either.
  device->memory().Reserve(2 * kRunBytes + (int64_t{8} << 20));
  std::vector<Buffer> third;
  EXPECT_LT(FaultsOfARun(*device, &third), pages / 20) << "Reserve faulted the run's pages in";
}

TEST(CpuDeviceTest, ReserveIsAHintThatAllocatesNothing) {
  auto device = MakeCpuDevice();
  const int64_t before = device->memory().system_allocations();
  device->memory().Reserve(int64_t{16} << 20);
  device->memory().Reserve(0);
  EXPECT_EQ(device->memory().bytes_in_use(), 0);
  EXPECT_EQ(device->memory().system_allocations(), before);
}


// Ranks that share a device share a core: local ranks k*j .. k*j+k-1 take the j-th allowed core,
// round robin over the cores when there are more devices than cores.
TEST(CoreForLocalRank, RanksOfOneDeviceShareItsCore) {
  const std::vector<int> cores = {2, 5};
  EXPECT_EQ(CoreForLocalRank(0, cores, 2), 2);
  EXPECT_EQ(CoreForLocalRank(1, cores, 2), 2);
  EXPECT_EQ(CoreForLocalRank(2, cores, 2), 5);
  EXPECT_EQ(CoreForLocalRank(3, cores, 2), 5);
  EXPECT_EQ(CoreForLocalRank(4, cores, 2), 2) << "a third device wraps to the first core";
  EXPECT_EQ(CoreForLocalRank(3, cores, 1), 5);
  EXPECT_EQ(CoreForLocalRank(0, {}, 2), -1);
}

// Binding to an allowed core leaves exactly that core; an impossible one says which, and the
// process keeps the cores it had.
TEST(CoreForLocalRank, PinToCoreBindsTheProcess) {
  const std::vector<int> before = AllowedCores();
  ASSERT_FALSE(before.empty());
  PinToCore(before.back());
  EXPECT_EQ(AllowedCores(), std::vector<int>{before.back()});
  try {
    PinToCore(-1);
    ADD_FAILURE() << "no error for core -1";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("core -1"), std::string::npos) << e.what();
  }
  // Restore the test process's cores.
  cpu_set_t set;
  CPU_ZERO(&set);
  for (int c : before) CPU_SET(c, &set);
  ASSERT_EQ(sched_setaffinity(0, sizeof(set), &set), 0);
  EXPECT_EQ(AllowedCores(), before);
}

}  // namespace
}  // namespace stagecraft::exec
