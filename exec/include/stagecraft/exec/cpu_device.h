// The cpu backend's Device: host memory, OpenBLAS single-threaded SGEMM (one rank per core,
// so BLAS threads would only fight the other ranks) and the kernels/ host loops.
#pragma once

#include <memory>

#include "stagecraft/exec/device.h"

namespace stagecraft::exec {

std::unique_ptr<Device> MakeCpuDevice();

}  // namespace stagecraft::exec
