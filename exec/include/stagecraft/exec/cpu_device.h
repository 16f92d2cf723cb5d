// The cpu backend's Device: host memory, OpenBLAS single-threaded SGEMM (one rank per core,
// so BLAS threads would only fight the other ranks) and the kernels/ host loops.
#pragma once

#include <memory>
#include <vector>

#include "stagecraft/exec/device.h"

namespace stagecraft::exec {

std::unique_ptr<Device> MakeCpuDevice();

// Ranks that share a device (pipeline.ranks_per_device k > 1) on the cpu backend share a core,
// as the simulator time-slices them: local ranks k*j .. k*j+k-1 of a node take core j of
// `cores` (the cores this process may run on, in order), modulo their number. Left to the
// operating system, the node's processes would spread over its cores as it pleases, and two
// ranks of one "device" would often run side by side on two cores.
int CoreForLocalRank(int local_rank, const std::vector<int>& cores, int ranks_per_device);
// The cores this process may run on (sched_getaffinity), in increasing order.
std::vector<int> AllowedCores();
// Binds the calling process to `core` (sched_setaffinity); throws std::runtime_error naming
// the core and the system's reason when it cannot.
void PinToCore(int core);

}  // namespace stagecraft::exec
