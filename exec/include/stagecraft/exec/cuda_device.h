// The cuda backend's Device (DESIGN.md §5): device memory with byte accounting, a peak and a
// pool; cuBLAS GEMMs in the run's GemmPrecision; the kernels/ launchers for the element-wise
// math, the loss and the optimizers; everything on one compute stream per process; op times
// from CUDA events, read back when the runtime resolves its stamps (once per step). Built when
// the CUDA toolkit is found; without it CudaDeviceCount() is 0 and MakeCudaDevice throws.
#pragma once

#include <memory>
#include <string>

#include "stagecraft/exec/cuda_plan.h"
#include "stagecraft/exec/device.h"

namespace stagecraft::exec {

// Whether this build has the cuda backend.
bool HaveCudaBackend();
// The CUDA devices this process sees: 0 without a CUDA build, a driver or a device.
int CudaDeviceCount();
// The Device on GPU `gpu` (made current for this process); throws std::runtime_error naming
// the host, the call, file:line and CUDA's message when it cannot be made.
std::unique_ptr<Device> MakeCudaDevice(int gpu, GemmPrecision precision);
// The PCI bus id of GPU `gpu` as this process sees it ("0000:3b:00.0"): the same GPU has the
// same id in every process, whatever CUDA_VISIBLE_DEVICES numbered it. Empty without a cuda
// build or a GPU (gpu < 0, GpuForLocalRank's "none").
std::string CudaPciBusId(int gpu);
// The compute stream (a cudaStream_t) of a device made by MakeCudaDevice, for a transport that
// orders its own stream against it; throws std::invalid_argument for any other device.
void* CudaComputeStream(Device& device);

}  // namespace stagecraft::exec
