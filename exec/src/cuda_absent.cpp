// The cuda backend's entry points in a build without the CUDA toolkit (cuda_device.h,
// devices.h): no devices, a probe that says so, and a clear error for whoever asks for one.
#include "stagecraft/exec/cuda_device.h"

#include <cstdlib>
#include <stdexcept>

#include "stagecraft/exec/devices.h"

#if !STAGECRAFT_WITH_CUDA
namespace stagecraft::exec {

bool HaveCudaBackend() { return false; }
int CudaDeviceCount() { return 0; }
std::unique_ptr<Device> MakeCudaDevice(int, GemmPrecision) {
  throw std::runtime_error("this build has no cuda backend (the CUDA toolkit was not found when it was configured)");
}
std::string CudaPciBusId(int) { return {}; }

CudaProbe ProbeCuda(bool) {
  CudaProbe p;  // have_backend false: JudgeDevices says "this build has no cuda backend"
  if (const char* visible = std::getenv("CUDA_VISIBLE_DEVICES"); visible != nullptr) p.visible_devices = visible;
  return p;
}

void* CudaComputeStream(Device& device) {
  throw std::invalid_argument("CudaComputeStream: " + device.Name() + " is not a cuda device (no cuda backend)");
}
int64_t CudaFusedCalls(Device& device) {
  throw std::invalid_argument("CudaFusedCalls: " + device.Name() + " is not a cuda device (no cuda backend)");
}

int64_t CudaPoolReservedBytes(Device& device) {
  throw std::invalid_argument("CudaPoolReservedBytes: " + device.Name() + " is not a cuda device (no cuda backend)");
}
int64_t CudaEventNs(Device& device, void*) {
  throw std::invalid_argument("CudaEventNs: " + device.Name() + " is not a cuda device (no cuda backend)");
}
int CudaStampOn(Device& device, void*) {
  throw std::invalid_argument("CudaStampOn: " + device.Name() + " is not a cuda device (no cuda backend)");
}

}  // namespace stagecraft::exec
#endif
