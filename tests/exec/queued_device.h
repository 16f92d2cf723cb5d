// A Device for tests of the runtime's clocks as a GPU drives them: the host posts work and the
// device reaches it later. The test sets the host's clock (host_ns) and the time the device's
// queue reaches the work queued so far (queue_ns); Stamp() marks that time, as a CUDA event
// recorded on the compute stream does. Memory is host memory; the math is never called here
// (it has no layer ops). A test may hold the device
// back (reached_ns), as a GPU whose queue waits for a receive that has not come.
#pragma once

#include <algorithm>
#include <climits>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "stagecraft/exec/device.h"
#include "stagecraft/schedules/run_record.h"

namespace stagecraft::testing {

class QueuedDevice final : public exec::Device {
 public:
  QueuedDevice() : streams_(*this), clock_(*this) {}
  std::string Name() const override { return "queued"; }
  exec::DeviceMemory& memory() override { return memory_; }
  exec::DeviceStreams& streams() override { return streams_; }
  exec::DeviceClock& clock() override { return clock_; }
  // No layer ops at all: a clock test that reaches one crashes on its null pointer.
  const exec::LayerOps& ops() const override { return no_ops_; }
  exec::OpContext& op_context() override { return context_; }

  int64_t host_ns = 0;   // the host's clock now
  int64_t queue_ns = 0;  // when the device reaches the work queued so far
  int64_t reached_ns = INT64_MAX;  // how far the device has got (Reached): everything, unless told
  int catch_up_after = -1;
  int reached_polls = 0;

 private:
  class Memory final : public exec::DeviceMemory {
   public:
    float* Allocate(int64_t floats, exec::MemoryTier tier) override {
      Track(floats * static_cast<int64_t>(sizeof(float)), tier);
      return new float[static_cast<size_t>(floats)]();
    }
    void Free(float* data, int64_t floats, exec::MemoryTier tier) override {
      Track(-floats * static_cast<int64_t>(sizeof(float)), tier);
      delete[] data;
    }
    void Upload(float* dst, const float* host, int64_t n) override { std::memcpy(dst, host, Bytes(n)); }
    void Download(float* host, const float* src, int64_t n) override { std::memcpy(host, src, Bytes(n)); }
    void Copy(float* dst, const float* src, int64_t n) override { std::memcpy(dst, src, Bytes(n)); }
    void Fill(float* dst, float value, int64_t n) override {
      for (int64_t i = 0; i < n; ++i) dst[i] = value;
    }
    void CopyAsync(float* dst, exec::MemoryTier, const float* src, exec::MemoryTier, int64_t n,
                   exec::StreamKind) override {
      Copy(dst, src, n);
    }

   private:
    static size_t Bytes(int64_t n) { return static_cast<size_t>(n) * sizeof(float); }
  };

  class Streams final : public exec::DeviceStreams {
   public:
    explicit Streams(QueuedDevice& d) : d_(d) {}
    // The queue drains: the device catches up with the host.
    void Synchronize(exec::StreamKind) override { d_.queue_ns = std::max(d_.queue_ns, d_.host_ns); }
    bool Idle(exec::StreamKind) override { return d_.queue_ns <= d_.host_ns; }
    void OrderAfter(exec::StreamKind, exec::StreamKind) override {}
    void* Native(exec::StreamKind) override { return nullptr; }

   private:
    QueuedDevice& d_;
  };

  class Clock final : public exec::DeviceClock {
   public:
    explicit Clock(QueuedDevice& d) : d_(d) {}
    int64_t NowNs() override { return d_.host_ns; }
    int Stamp() override {
      stamps_.push_back(d_.queue_ns);
      return static_cast<int>(stamps_.size()) - 1;
    }
    int64_t StampNs(int id) override { return stamps_.at(static_cast<size_t>(id)); }
    void ClearStamps() override { stamps_.clear(); }
    // A stamp is reached once the device has got as far as its time; after `catch_up_after`
    // polls (when not negative) the device has caught up with all of them.
    bool Reached(int id) override {
      ++d_.reached_polls;
      if (d_.catch_up_after >= 0 && d_.reached_polls > d_.catch_up_after) d_.reached_ns = INT64_MAX;
      return stamps_.at(static_cast<size_t>(id)) <= d_.reached_ns;
    }

   private:
    QueuedDevice& d_;
    std::vector<int64_t> stamps_;
  };

  Memory memory_;
  Streams streams_;
  Clock clock_;
  exec::LayerOps no_ops_{};
  exec::OpContext context_;
};

// A rank's record of `ops` ops, none timed yet: where a clock under test writes.
inline schedules::RankRecord EmptyRecord(size_t ops) {
  schedules::RankRecord record;
  record.ops.resize(ops);
  return record;
}

}  // namespace stagecraft::testing
