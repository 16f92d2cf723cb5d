// The cpu backend's Device: host memory, OpenBLAS single-threaded SGEMM (one rank per core,
// so BLAS threads would only fight the other ranks) and the kernels/ host loops.
#pragma once

#include <memory>
#include <vector>

#include "stagecraft/exec/device.h"

namespace stagecraft::exec {

std::unique_ptr<Device> MakeCpuDevice();

// Where ranks share a device (pipeline.ranks_per_device k > 1), the cpu backend's device is a
// core: local ranks k*j .. k*j+k-1 run on core j (modulo the cores), as the simulator places
// neighbouring ranks, so the ranks that time-slice a core are the ones it models sharing it.
// The core of `local_rank` among `allowed` (the CPUs the process may run on, in order); -1 when
// there are none. With k = 1 a rank is not pinned (the launcher's binding stands).
int CoreForLocalRank(int local_rank, int ranks_per_device, const std::vector<int>& allowed);
// Pins this process (every thread it starts from now on too) to core CoreForLocalRank of the
// CPUs it may run on now; throws std::runtime_error naming the call when the system refuses.
void PinToSharedCore(int local_rank, int ranks_per_device);

}  // namespace stagecraft::exec
