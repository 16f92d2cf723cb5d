// The cpu backend's memory part (cpu_parts.h): both tiers are host memory. The device tier
// comes from 64-byte aligned blocks of the heap, kept for reuse by size; the host tier (staging,
// offload) from new[], kept likewise; copies between them are memcpy, done before the call
// returns.
#include <malloc.h>
#include <unistd.h>

#include <algorithm>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <vector>

#include <fmt/format.h>

#include "cpu_parts.h"
#include "stagecraft/base/check.h"
#include "stagecraft/exec/block_pool.h"

namespace stagecraft::exec {
namespace {

// Blocks up to this size come from the heap, whose freed memory the process keeps (see the
// constructor); a larger one is mapped on its own and faults its pages in at first touch.
constexpr int64_t kHeapBlockMaxBytes = int64_t{32} << 20;

// 64-byte aligned blocks (whole cache lines and AVX-512 vectors) from malloc, the distance to
// malloc's pointer kept in the byte before the block. glibc's aligned_alloc leaves the heap
// in pieces it does not reuse for the next aligned request of the same size, so every run
// would take fresh pages; malloc's blocks are reused as freed.
constexpr uint64_t kAlign = 64;
void* AlignedAlloc(uint64_t bytes) {
  if (bytes > UINT64_MAX - kAlign) return nullptr;
  auto* raw = static_cast<unsigned char*>(std::malloc(bytes + kAlign));
  if (raw == nullptr) return nullptr;
  unsigned char* block = raw + (kAlign - reinterpret_cast<uintptr_t>(raw) % kAlign);  // 1 .. 64 bytes on
  block[-1] = static_cast<unsigned char>(block - raw);
  return block;
}
void AlignedFree(void* p) {
  auto* block = static_cast<unsigned char*>(p);
  std::free(block - block[-1]);
}

class CpuMemory final : public DeviceMemory {
 public:
  CpuMemory() {
#ifdef M_MMAP_THRESHOLD
    // glibc maps blocks of 128 KiB and more on their own and unmaps them when freed, and gives
    // the heap's free top back to the system: memory a run freed, or that Reserve faulted in,
    // would fault again at its next use. Here blocks up to 32 MiB (glibc's largest threshold)
    // come from the heap, and the heap keeps what is freed.
    mallopt(M_MMAP_THRESHOLD, static_cast<int>(kHeapBlockMaxBytes));
    mallopt(M_TRIM_THRESHOLD, INT_MAX);
#endif
  }
  ~CpuMemory() override { ReleaseCached(); }

  float* Allocate(int64_t floats, MemoryTier tier) override {
    SC_CHECK(floats > 0, "allocations are never empty");
    const int64_t bytes = floats * static_cast<int64_t>(sizeof(float));
    Admit(bytes, tier);
    if (tier == MemoryTier::kHost) {
      float* block = host_free_.Take(floats);
      if (block == nullptr) block = new float[static_cast<size_t>(floats)];
      Track(bytes, MemoryTier::kHost);
      return block;
    }
    if (float* kept = free_.Take(floats)) {
      Track(bytes);
      return kept;
    }
    const uint64_t total = static_cast<uint64_t>(floats) * sizeof(float);
    void* p = total / sizeof(float) != static_cast<uint64_t>(floats) ? nullptr : AlignedAlloc(total);
    if (p == nullptr) {
      throw OutOfMemory(
          fmt::format("cannot allocate {} bytes of host memory ({} bytes in use)", total, bytes_in_use()));
    }
    Track(bytes);
    CountSystemAllocation();
    return static_cast<float*>(p);
  }
  void Free(float* data, int64_t floats, MemoryTier tier) override {
    Track(-floats * static_cast<int64_t>(sizeof(float)), tier);
    if (tier == MemoryTier::kHost) {
      host_free_.Keep(data, floats);
      return;
    }
    free_.Keep(data, floats);
  }
  void Upload(float* dst, const float* host, int64_t n) override { Copy(dst, host, n); }
  void Download(float* host, const float* src, int64_t n) override { Copy(host, src, n); }
  void Copy(float* dst, const float* src, int64_t n) override {
    if (n > 0) std::memcpy(dst, src, static_cast<size_t>(n) * sizeof(float));
  }
  void Fill(float* dst, float value, int64_t n) override { std::fill(dst, dst + std::max<int64_t>(n, 0), value); }
  void CopyAsync(float* dst, MemoryTier, const float* src, MemoryTier, int64_t n, StreamKind) override {
    Copy(dst, src, n);
  }
  void ReleaseCached() override {
    free_.Drain([](float* block, int64_t) { AlignedFree(block); });
    host_free_.Drain([](float* block, int64_t) { delete[] block; });
  }
  // Faults `bytes` of heap in, in blocks the heap keeps once freed, and frees them: the next
  // allocations are carved out of those pages.
  void Reserve(int64_t bytes) override {
    const int64_t page = std::max<int64_t>(1, sysconf(_SC_PAGESIZE));
    std::vector<void*> blocks;
    for (int64_t left = bytes; left > 0; left -= kHeapBlockMaxBytes / 2) {
      const int64_t n = std::min(left, kHeapBlockMaxBytes / 2);
      auto* block = static_cast<volatile char*>(std::malloc(static_cast<size_t>(n)));
      if (block == nullptr) break;  // a hint: what cannot be had now is faulted in when used
      for (int64_t at = 0; at < n; at += page) block[at] = 0;
      blocks.push_back(const_cast<char*>(block));
    }
    for (void* block : blocks) std::free(block);
  }

 private:
  BlockPool free_;
  BlockPool host_free_;  // host-tier blocks
};

}  // namespace

std::unique_ptr<DeviceMemory> MakeCpuMemory() { return std::make_unique<CpuMemory>(); }

}  // namespace stagecraft::exec
