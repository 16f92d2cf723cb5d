// DeviceMemory: the memory part of a Device (device.h): allocation per tier, byte accounting
// per tier, and copies within and between tiers. The device tier is where the math reads its
// tensors (GPU memory on cuda; host memory on cpu, whose copies are memcpy); the host tier is
// host memory the device copies to and from fast (page-locked on cuda), for staging and offload.
#pragma once

#include <array>
#include <cstdint>
#include <stdexcept>
#include <string>

#include "stagecraft/exec/device_streams.h"

namespace stagecraft::exec {

// An allocation the device could not satisfy (its memory is full). The runtime prefixes the op
// it was running; the job then ends like any other rank failure.
class OutOfMemory : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

enum class MemoryTier { kDevice, kHost };
inline constexpr int kMemoryTiers = 2;

class DeviceMemory {
 public:
  virtual ~DeviceMemory() = default;

  // Never returns null (throws OutOfMemory when the tier is exhausted). Device-tier blocks freed
  // are kept for reuse by size, so a run whose buffers repeat every microbatch allocates nothing
  // from the system once warm; system_allocations() counts the device-tier blocks really obtained
  // (tests check the steady state). Host-tier blocks are kept for reuse the same way (an offload's
  // buffers repeat every microbatch, and page-locked memory is slow to get).
  virtual float* Allocate(int64_t floats, MemoryTier tier = MemoryTier::kDevice) = 0;
  virtual void Free(float* data, int64_t floats, MemoryTier tier = MemoryTier::kDevice) = 0;
  // Device-tier memory from and to ordinary host memory; both return once the copy is done, so
  // the host buffer may go right after.
  virtual void Upload(float* dst, const float* host, int64_t n) = 0;
  virtual void Download(float* host, const float* src, int64_t n) = 0;
  // Within the device tier, on the compute stream.
  virtual void Copy(float* dst, const float* src, int64_t n) = 0;
  virtual void Fill(float* dst, float value, int64_t n) = 0;
  // n floats from `src` (in `src_tier`) to `dst` (in `dst_tier`), queued on `stream` without a
  // host wait (cuda; the cpu copies at once). The caller orders the stream against the work that
  // makes and reads the data (DeviceStreams::OrderAfter).
  virtual void CopyAsync(float* dst, MemoryTier dst_tier, const float* src, MemoryTier src_tier, int64_t n,
                         StreamKind stream) = 0;
  // Gives the device-tier blocks kept for reuse back to the system, between runs (no transfer in
  // flight): one schedule's sizes would otherwise stay held while the next needs others.
  virtual void ReleaseCached() {}
  // Before a run, outside its clock: makes the next `bytes` of device-tier allocations find
  // memory the system has already handed over, so that a run's first step pays no cost its later
  // steps do not. A hint, and a no-op where memory has no such first cost.
  virtual void Reserve(int64_t /*bytes*/) {}

  // Bytes of live allocations in a tier, and their high-water mark since the last ResetPeak.
  int64_t bytes_in_use(MemoryTier tier = MemoryTier::kDevice) const { return in_use_[Index(tier)]; }
  int64_t peak_bytes(MemoryTier tier = MemoryTier::kDevice) const { return peak_[Index(tier)]; }
  int64_t system_allocations() const { return system_allocations_; }
  void ResetPeak() { peak_ = in_use_; }

  // A hard limit on a tier's live bytes (0: none): an allocation past it throws OutOfMemory, as a
  // full device does. The executor sets the device memory its scenario states, and the host
  // tier's share of the node's host memory, so a run that would not fit there fails here too.
  void SetLimit(MemoryTier tier, int64_t bytes) { limit_[Index(tier)] = bytes; }
  int64_t limit(MemoryTier tier) const { return limit_[Index(tier)]; }

 protected:
  // Before an allocation of `bytes` in `tier`: throws OutOfMemory when it would pass the limit.
  void Admit(int64_t bytes, MemoryTier tier) const {
    const int i = Index(tier);
    if (limit_[i] <= 0 || in_use_[i] + bytes <= limit_[i]) return;
    throw OutOfMemory(std::string(tier == MemoryTier::kDevice ? "device" : "host") + " memory limit of " +
                      std::to_string(limit_[i]) + " bytes: " + std::to_string(in_use_[i]) + " in use, " +
                      std::to_string(bytes) + " more asked");
  }
  void Track(int64_t delta_bytes, MemoryTier tier = MemoryTier::kDevice) {
    const int i = Index(tier);
    in_use_[i] += delta_bytes;
    if (in_use_[i] > peak_[i]) peak_[i] = in_use_[i];
  }
  void CountSystemAllocation() { ++system_allocations_; }

 private:
  static int Index(MemoryTier tier) { return static_cast<int>(tier); }

  std::array<int64_t, kMemoryTiers> in_use_{};
  std::array<int64_t, kMemoryTiers> peak_{};
  std::array<int64_t, kMemoryTiers> limit_{};
  int64_t system_allocations_ = 0;
};

}  // namespace stagecraft::exec
