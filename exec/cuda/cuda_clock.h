// CudaClock: the cuda backend's clock part (device_clock.h; private to the cuda backend), over
// EventStamps, the device's op times: CUDA events recorded on the compute stream with no host
// wait, read back on the host's steady clock through an origin event matched to it; and the
// times of events other streams of the device recorded (CudaEventNs: transfers and
// collectives), through the same origin.
// Whether a stamp is reached is asked without waiting (Reached), so the runtime can bound its wait.
#pragma once

#include <cuda_runtime.h>

#include <array>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <unordered_map>
#include <vector>

#include "stagecraft/exec/device_clock.h"
#include "stagecraft/exec/device_graphs.h"
#include "stagecraft/kernels/cuda_check.h"

namespace stagecraft::exec {

// The host clock every op of a run shares (steady, ns).
inline int64_t SteadyNowNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

class EventStamps {
 public:
  explicit EventStamps(cudaStream_t stream) : stream_(stream) {
    SC_CUDA_CHECK(cudaEventCreate(&origin_));
    SC_CUDA_CHECK(cudaStreamCreateWithFlags(&origin_stream_, cudaStreamNonBlocking));
  }
  EventStamps(const EventStamps&) = delete;
  EventStamps& operator=(const EventStamps&) = delete;
  // Best effort: a destructor must not throw.
  ~EventStamps() {
    for (cudaEvent_t event : events_) (void)cudaEventDestroy(event);
    for (const std::vector<cudaEvent_t>& instance : graph_events_) {
      for (cudaEvent_t event : instance) (void)cudaEventDestroy(event);
    }
    (void)cudaEventDestroy(origin_);
    (void)cudaStreamDestroy(origin_stream_);
  }

  int Stamp() { return Stamp(stream_); }
  // A stamp recorded on `stream`, another stream of the same device, in the same series.
  int Stamp(cudaStream_t stream) {
    if (capturing_) return GraphStamp(stream);
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

  // Graph stamps (device_graphs.h): while a capture is open on the compute stream, Stamp()
  // records an event node into the graph (cudaEventRecordExternal: recorded at each launch) and
  // returns an id from DeviceGraphs::kGraphStampBase; each instance of a segment records its own
  // events, which Clear leaves alone. The origin is set before any capture (the clock's first
  // Clear).
  void SetCapturing(bool capturing) { capturing_ = capturing; }
  bool capturing() const { return capturing_; }
  // `exec`, instantiated from the captured `graph`, becomes instance `instance`: each of the
  // graph's nodes that records a graph stamp's instance-0 event records that stamp's event of
  // `instance` instead in `exec`.
  void RetargetStamps(cudaGraph_t graph, cudaGraphExec_t exec, int instance) {
    size_t count = 0;
    SC_CUDA_CHECK(cudaGraphGetNodes(graph, nullptr, &count));
    std::vector<cudaGraphNode_t> nodes(count);
    SC_CUDA_CHECK(cudaGraphGetNodes(graph, nodes.data(), &count));
    for (cudaGraphNode_t node : nodes) {
      cudaGraphNodeType type{};
      SC_CUDA_CHECK(cudaGraphNodeGetType(node, &type));
      if (type != cudaGraphNodeTypeEventRecord) continue;
      cudaEvent_t event = nullptr;
      SC_CUDA_CHECK(cudaGraphEventRecordNodeGetEvent(node, &event));
      const auto it = graph_index_.find(event);
      if (it == graph_index_.end()) continue;  // not a stamp of ours
      const cudaEvent_t mine = graph_events_.at(static_cast<size_t>(instance))[it->second];
      SC_CUDA_CHECK(cudaGraphExecEventRecordNodeSetEvent(exec, node, mine));
    }
  }
  // The graphs are gone: their stamps' ids are taken again from the first.
  void ClearGraphStamps() { next_graph_stamp_ = 0; }

 private:
  cudaEvent_t At(int id) const {
    if (id >= DeviceGraphs::kGraphStampBase) {
      const int offset = id - DeviceGraphs::kGraphStampBase;
      const int instance = offset / DeviceGraphs::kInstanceStride, index = offset % DeviceGraphs::kInstanceStride;
      if (instance < DeviceGraphs::kInstances && static_cast<size_t>(index) < next_graph_stamp_) {
        return graph_events_[static_cast<size_t>(instance)][static_cast<size_t>(index)];
      }
      throw std::out_of_range("CudaDevice: no graph stamp " + std::to_string(id));
    }
    if (id < 0 || static_cast<size_t>(id) >= next_stamp_) {
      throw std::out_of_range("CudaDevice: no stamp " + std::to_string(id));
    }
    return events_[static_cast<size_t>(id)];
  }

  int GraphStamp(cudaStream_t stream) {
    if (next_graph_stamp_ == graph_events_[0].size()) {
      if (next_graph_stamp_ >= static_cast<size_t>(DeviceGraphs::kInstanceStride)) {
        throw std::length_error("CudaDevice: more graph stamps than an instance's range holds");
      }
      for (std::vector<cudaEvent_t>& instance : graph_events_) {
        cudaEvent_t event = nullptr;
        SC_CUDA_CHECK(cudaEventCreate(&event));  // timed: StampNs reads it
        instance.push_back(event);
      }
      graph_index_[graph_events_[0].back()] = next_graph_stamp_;
    }
    SC_CUDA_CHECK(cudaEventRecordWithFlags(graph_events_[0][next_graph_stamp_], stream, cudaEventRecordExternal));
    return DeviceGraphs::kGraphStampBase + static_cast<int>(next_graph_stamp_++);
  }

  // Op timestamps older than this are re-based on a fresh origin at the next Clear:
  // cudaEventElapsedTime returns float milliseconds, whose resolution coarsens with distance.
  static constexpr int64_t kOriginLifetimeNs = 10'000'000'000;

  // The GPU time of origin_ matched to the host clock: recorded on a stream of its own that never
  // holds work, so the event completes at once and the host reads its clock right after, without
  // waiting for the compute stream (whose queue may hold a step's graph waiting on a peer's
  // transfer: a wait there would be unbounded). Events of one device's streams share its clock.
  void SetOrigin() {
    SC_CUDA_CHECK(cudaEventRecord(origin_, origin_stream_));
    SC_CUDA_CHECK(cudaEventSynchronize(origin_));
    origin_ns_ = SteadyNowNs();
  }

  cudaStream_t stream_;
  std::vector<cudaEvent_t> events_;  // stamps, reused after each Clear
  size_t next_stamp_ = 0;
  std::array<std::vector<cudaEvent_t>, DeviceGraphs::kInstances> graph_events_;  // graph stamps, by instance
  std::unordered_map<cudaEvent_t, size_t> graph_index_;  // an instance-0 event's index
  size_t next_graph_stamp_ = 0;
  bool capturing_ = false;
  cudaEvent_t origin_ = nullptr;
  cudaStream_t origin_stream_ = nullptr;  // idle but for the origin's records
  int64_t origin_ns_ = -1;
};

// The clock part: the stamps of the compute stream, on the host's steady clock.
class CudaClock final : public DeviceClock {
 public:
  // `streams` gives the copy streams' handles (DeviceStreams::Native); it must outlive the clock.
  CudaClock(cudaStream_t compute, DeviceStreams& streams) : stamps_(compute), streams_(streams) {}
  int64_t NowNs() override { return SteadyNowNs(); }
  int Stamp() override { return stamps_.Stamp(); }
  int StampOn(StreamKind stream) override {
    // A graph's stamps are the compute stream's: a copy stream's, taken while a capture is open,
    // would pull that stream into the capture (step graphs refuse runs with copies).
    if (stamps_.capturing() && stream != StreamKind::kCompute) {
      throw std::logic_error("CudaDevice: a copy stream stamped while a step is captured");
    }
    return stamps_.Stamp(static_cast<cudaStream_t>(streams_.Native(stream)));
  }
  int64_t StampNs(int id) override { return stamps_.StampNs(id); }
  bool Reached(int id) override { return stamps_.Reached(id); }
  void ClearStamps() override { stamps_.Clear(); }
  // When `event` (timed, recorded on any stream of the device, complete) completed, on the same origin.
  int64_t EventNs(cudaEvent_t event) { return stamps_.EventNs(event); }
  EventStamps& stamps() { return stamps_; }

 private:
  EventStamps stamps_;
  DeviceStreams& streams_;
};

}  // namespace stagecraft::exec
