// DeviceGraphs: the graphs part of a device that can record the work it queues on its compute
// stream and launch that record again as one unit (cuda: CUDA Graphs, stream capture). A device
// that runs every call as it is made (cpu) has none (Device::graphs() is null).
//
// While a capture is open, nothing queued on the compute stream runs: it is recorded, and the
// clock's Stamp() records a stamp into the graph (recorded again at each launch). EndCapture
// makes the record a segment, ready to launch in kInstances instances that run the same work and
// differ only in their stamps' ids (StampIn), so that one instance's stamps can be read back while
// the other runs. The memory a segment's work uses (what was allocated while it was captured)
// stays the graphs' until Release: nothing allocated outside a capture is given it in between.
#pragma once

namespace stagecraft::exec {

class DeviceGraphs {
 public:
  // Instances of each segment, and the id a stamp taken in capture (`capture_stamp`) has in
  // instance `instance`: stamps of graphs are ids from kGraphStampBase, each instance's in its
  // own range, apart from the clock's own stamps (0, 1, ... since its last ClearStamps), which
  // a ClearStamps does not touch.
  static constexpr int kInstances = 2;
  static constexpr int kGraphStampBase = 1 << 24;
  static constexpr int kInstanceStride = 1 << 22;
  static constexpr int StampIn(int capture_stamp, int instance) { return capture_stamp + instance * kInstanceStride; }

  virtual ~DeviceGraphs() = default;
  // Opens a capture on the compute stream (none may be open).
  virtual void BeginCapture() = 0;
  // Closes it: its work is segment 0, 1, ... (in the order captured), returned, not yet run.
  // Throws, naming the call, when the capture failed (a call it cannot record was made in it).
  virtual int EndCapture() = 0;
  // Closes an open capture and drops what it recorded, after a failure; never throws.
  virtual void AbandonCapture() noexcept = 0;
  virtual bool capturing() const = 0;
  // Queues instance `instance` of segment `segment` on the compute stream.
  virtual void Launch(int segment, int instance) = 0;
  // Every segment is dropped (after its launches ran: the caller synchronizes first) and its
  // memory returns to the device's pool.
  virtual void Release() = 0;
  virtual int segments() const = 0;
};

}  // namespace stagecraft::exec
