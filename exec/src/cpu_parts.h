// The cpu backend's device parts (device.h), each in its own file; cpu_device.cpp puts them
// together. Private to exec/src.
#pragma once

#include <memory>

#include "stagecraft/exec/device_clock.h"
#include "stagecraft/exec/device_memory.h"
#include "stagecraft/exec/device_streams.h"

namespace stagecraft::exec {

// Host memory in both tiers: the device tier from malloc'd 64-byte aligned blocks kept for
// reuse (cpu_memory.cpp), the host tier from new[]; every copy is a memcpy.
std::unique_ptr<DeviceMemory> MakeCpuMemory();
// Streams that are always idle: every call has run to completion when it returns.
std::unique_ptr<DeviceStreams> MakeCpuStreams();
// The steady clock; a stamp reads it (cpu_clock.cpp).
std::unique_ptr<DeviceClock> MakeCpuClock();

}  // namespace stagecraft::exec
