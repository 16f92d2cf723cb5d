// CudaClock: the cuda backend's clock part (device_clock.h; private to the cuda backend), over
// EventStamps, the device's op times: CUDA events recorded on the compute stream with no host
// wait, read back on the host's steady clock through an origin event matched to it; and the
// times of events other streams of the device recorded (CudaEventNs: transfers and
// collectives), through the same origin.
// Whether a stamp is reached is asked without waiting (Reached), so the runtime can bound its wait.
#pragma once

#include <cuda_runtime.h>

#include <chrono>
#include <cmath>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

#include "stagecraft/exec/device_clock.h"
#include "stagecraft/kernels/cuda_check.h"

namespace stagecraft::exec {

// The host clock every op of a run shares (steady, ns).
inline int64_t SteadyNowNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

class EventStamps {
 public:
  explicit EventStamps(cudaStream_t stream) : stream_(stream) { SC_CUDA_CHECK(cudaEventCreate(&origin_)); }
  EventStamps(const EventStamps&) = delete;
  EventStamps& operator=(const EventStamps&) = delete;
  // Best effort: a destructor must not throw.
  ~EventStamps() {
    for (cudaEvent_t event : events_) (void)cudaEventDestroy(event);
    (void)cudaEventDestroy(origin_);
  }

  int Stamp() { return Stamp(stream_); }
  // A stamp recorded on `stream`, another stream of the same device, in the same series.
  int Stamp(cudaStream_t stream) {
    if (origin_ns_ < 0) SetOrigin();
    if (next_stamp_ == events_.size()) {
      cudaEvent_t event = nullptr;
      SC_CUDA_CHECK(cudaEventCreate(&event));
      events_.push_back(event);
    }
    SC_CUDA_CHECK(cudaEventRecord(events_[next_stamp_], stream));
    return static_cast<int>(next_stamp_++);
  }
  // Whether the stream has reached stamp `id`, without waiting (DeviceClock::Reached).
  bool Reached(int id) {
    const cudaError_t state = cudaEventQuery(At(id));
    if (state == cudaErrorNotReady) return false;
    SC_CUDA_CHECK(state);
    return true;
  }
  // Waits for the stamp unless it was reached (the runtime polls Reached under its deadline first).
  int64_t StampNs(int id) {
    const cudaEvent_t stamp = At(id);
    SC_CUDA_CHECK(cudaEventSynchronize(stamp));
    return EventNs(stamp);
  }
  // When `event`, made with timing and recorded on any stream of this device, completed, on the
  // host clock through the same origin as the stamps; it must have completed (a transport reads
  // it once cudaEventQuery says so). An event from before the origin was last re-based reads as
  // a negative offset from it, which is still its time.
  int64_t EventNs(cudaEvent_t event) {
    if (origin_ns_ < 0) SetOrigin();
    float ms = 0.0f;
    SC_CUDA_CHECK(cudaEventElapsedTime(&ms, origin_, event));
    return origin_ns_ + std::llround(static_cast<double>(ms) * 1e6);
  }
  void Clear() {
    next_stamp_ = 0;
    if (origin_ns_ < 0 || SteadyNowNs() - origin_ns_ > kOriginLifetimeNs) SetOrigin();
  }

 private:
  cudaEvent_t At(int id) const {
    if (id < 0 || static_cast<size_t>(id) >= next_stamp_) {
      throw std::out_of_range("CudaDevice: no stamp " + std::to_string(id));
    }
    return events_[static_cast<size_t>(id)];
  }

  // Op timestamps older than this are re-based on a fresh origin at the next Clear:
  // cudaEventElapsedTime returns float milliseconds, whose resolution coarsens with distance.
  static constexpr int64_t kOriginLifetimeNs = 10'000'000'000;

  // The GPU time of origin_ matched to the host clock: queued work drained first, so the event
  // completes at once and the host reads its clock right after.
  void SetOrigin() {
    SC_CUDA_CHECK(cudaStreamSynchronize(stream_));
    SC_CUDA_CHECK(cudaEventRecord(origin_, stream_));
    SC_CUDA_CHECK(cudaEventSynchronize(origin_));
    origin_ns_ = SteadyNowNs();
  }

  cudaStream_t stream_;
  std::vector<cudaEvent_t> events_;  // stamps, reused after each Clear
  size_t next_stamp_ = 0;
  cudaEvent_t origin_ = nullptr;
  int64_t origin_ns_ = -1;
};

// The clock part: the stamps of the compute stream, on the host's steady clock.
class CudaClock final : public DeviceClock {
 public:
  // `streams` gives the copy streams' handles (DeviceStreams::Native); it must outlive the clock.
  CudaClock(cudaStream_t compute, DeviceStreams& streams) : stamps_(compute), streams_(streams) {}
  int64_t NowNs() override { return SteadyNowNs(); }
  int Stamp() override { return stamps_.Stamp(); }
  int StampOn(StreamKind stream) override { return stamps_.Stamp(static_cast<cudaStream_t>(streams_.Native(stream))); }
  int64_t StampNs(int id) override { return stamps_.StampNs(id); }
  bool Reached(int id) override { return stamps_.Reached(id); }
  void ClearStamps() override { stamps_.Clear(); }
  // When `event` (timed, recorded on any stream of the device, complete) completed, on the same origin.
  int64_t EventNs(cudaEvent_t event) { return stamps_.EventNs(event); }

 private:
  EventStamps stamps_;
  DeviceStreams& streams_;
};

}  // namespace stagecraft::exec
