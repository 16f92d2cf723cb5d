// The cuda backend's entry points in a build without the CUDA toolkit (cuda_device.h): no
// devices, and a clear error for whoever asks for one.
#include "stagecraft/exec/cuda_device.h"

#include <stdexcept>

#if !STAGECRAFT_WITH_CUDA
namespace stagecraft::exec {

bool HaveCudaBackend() { return false; }
int CudaDeviceCount() { return 0; }
std::unique_ptr<Device> MakeCudaDevice(int, GemmPrecision) {
  throw std::runtime_error("this build has no cuda backend (the CUDA toolkit was not found when it was configured)");
}
std::string CudaPciBusId(int) { return {}; }

void* CudaComputeStream(Device& device) {
  throw std::invalid_argument("CudaComputeStream: " + device.Name() + " is not a cuda device (no cuda backend)");
}

}  // namespace stagecraft::exec
#endif
