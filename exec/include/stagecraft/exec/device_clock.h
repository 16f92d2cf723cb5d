// DeviceClock: the clock part of a Device (device.h): op times with no wait per op. On cuda,
// CUDA events on the compute stream read back on the host's steady clock; on cpu, the steady
// clock itself (each call has run to completion when it returns).
#pragma once

#include <cstdint>

#include "stagecraft/exec/device_streams.h"

namespace stagecraft::exec {

class DeviceClock {
 public:
  virtual ~DeviceClock() = default;
  // A host clock shared by every op of the run (steady, ns).
  virtual int64_t NowNs() = 0;
  // Stamp() marks the compute stream after the work queued so far and returns the mark's id
  // (0, 1, ... since the last ClearStamps); StampNs(id) is when the device reached the mark, on
  // NowNs()'s clock, waiting for it if it has not yet.
  virtual int Stamp() = 0;
  // The same mark on another of the device's streams (a copy's, StreamKind), in the same series
  // of ids. A device that runs every call to completion stamps the host clock either way.
  virtual int StampOn(StreamKind /*stream*/) { return Stamp(); }
  virtual int64_t StampNs(int id) = 0;
  // Whether the device has reached stamp `id`, so that StampNs(id) would not wait; asks without
  // waiting (a caller polls it under a deadline).
  virtual bool Reached(int id) = 0;
  virtual void ClearStamps() = 0;
};

}  // namespace stagecraft::exec
