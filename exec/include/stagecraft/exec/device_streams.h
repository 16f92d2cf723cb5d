// DeviceStreams: the streams part of a Device (device.h). Compute runs on one stream; copies
// between the memory tiers may run on a copy stream per direction beside it. Streams are ordered
// against each other without a host wait (OrderAfter); the cpu runs every call to completion,
// so there each stream is always idle and ordering is already given.
#pragma once

namespace stagecraft::exec {

enum class StreamKind { kCompute, kToHost, kToDevice };

class DeviceStreams {
 public:
  virtual ~DeviceStreams() = default;
  // Waits for the work queued on `stream`.
  virtual void Synchronize(StreamKind stream = StreamKind::kCompute) = 0;
  // Whether `stream` has run everything queued on it, asked without waiting (a caller polls it
  // under a deadline).
  virtual bool Idle(StreamKind stream) = 0;
  // Work queued on `waiter` from now on runs after the work queued on `producer` so far.
  virtual void OrderAfter(StreamKind waiter, StreamKind producer) = 0;
  // The backend's handle of `stream` (a cudaStream_t on cuda; null on cpu), for a transport that
  // orders its own streams against it.
  virtual void* Native(StreamKind stream) = 0;
  // A fence after the work queued on `stream` so far: FenceReached says, without waiting,
  // whether the stream has run it (a caller polls it under a deadline); DropFence gives it back,
  // once, reached or not. A device that runs each call to completion (cpu) makes fences that
  // are reached when made (null, the default).
  using Fence = void*;
  virtual Fence MakeFence(StreamKind /*stream*/) { return nullptr; }
  virtual bool FenceReached(Fence /*fence*/) { return true; }
  virtual void DropFence(Fence /*fence*/) {}
};

}  // namespace stagecraft::exec
