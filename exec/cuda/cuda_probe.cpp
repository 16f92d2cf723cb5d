// ProbeCuda (devices.h) in a build with the cuda backend: what the CUDA runtime, the driver and
// NCCL answer on this machine, recorded as they answer. Nothing here throws or judges: every
// failure is recorded with the call, CUDA's error name and message, and devices.cpp decides.
#include <cuda_runtime.h>
#if STAGECRAFT_WITH_NCCL
#include <nccl.h>
#endif

#include <cstdlib>
#include <string>

#include "stagecraft/exec/devices.h"
#include "stagecraft/kernels/cuda.h"

#ifndef STAGECRAFT_CUDA_ARCHITECTURES
#error "STAGECRAFT_CUDA_ARCHITECTURES (the kernels' CUDA_ARCHITECTURES) comes from exec/CMakeLists.txt"
#endif

namespace stagecraft::exec {
namespace {

static_assert(cuda_error::kInitializationError == cudaErrorInitializationError);
static_assert(cuda_error::kStubLibrary == cudaErrorStubLibrary);
static_assert(cuda_error::kInsufficientDriver == cudaErrorInsufficientDriver);
static_assert(cuda_error::kDevicesUnavailable == cudaErrorDevicesUnavailable);
static_assert(cuda_error::kNoDevice == cudaErrorNoDevice);
static_assert(cuda_error::kDeviceNotLicensed == cudaErrorDeviceNotLicensed);
static_assert(cuda_error::kEccUncorrectable == cudaErrorECCUncorrectable);
static_assert(cuda_error::kNotPermitted == cudaErrorNotPermitted);
static_assert(cuda_error::kSystemNotReady == cudaErrorSystemNotReady);
static_assert(cuda_error::kSystemDriverMismatch == cudaErrorSystemDriverMismatch);
static_assert(cuda_error::kCompatNotSupportedOnDevice == cudaErrorCompatNotSupportedOnDevice);
static_assert(static_cast<int>(ComputeMode::kProhibited) == cudaComputeModeProhibited);
static_assert(static_cast<int>(ComputeMode::kExclusiveProcess) == cudaComputeModeExclusiveProcess);

std::string ErrorText(cudaError_t status, const char* call) {
  return std::string(call) + ": " + cudaGetErrorName(status) + " '" + cudaGetErrorString(status) + "'";
}

// Records the first failure of a GPU's queries; the runtime's sticky error is cleared so that
// the next GPU is asked afresh.
bool Ok(cudaError_t status, const char* call, GpuProbe* gpu) {
  if (status == cudaSuccess) return true;
  (void)cudaGetLastError();
  if (gpu->error == cuda_error::kSuccess) {
    gpu->error = static_cast<int>(status);
    gpu->error_text = ErrorText(status, call);
  }
  return false;
}

GpuProbe ProbeGpu(int index, bool open_context) {
  GpuProbe g;
  g.index = index;
  cudaDeviceProp prop{};
  if (!Ok(cudaGetDeviceProperties(&prop, index), "cudaGetDeviceProperties", &g)) return g;
  g.name = prop.name;
  g.memory_bytes = static_cast<int64_t>(prop.totalGlobalMem);
  g.major = prop.major;
  g.minor = prop.minor;
  int mode = 0;
  if (Ok(cudaDeviceGetAttribute(&mode, cudaDevAttrComputeMode, index), "cudaDeviceGetAttribute(ComputeMode)", &g)) {
    g.compute_mode = static_cast<ComputeMode>(mode);
  }
  char bus_id[64] = {};
  if (Ok(cudaDeviceGetPCIBusId(bus_id, sizeof(bus_id), index), "cudaDeviceGetPCIBusId", &g)) g.pci_bus_id = bus_id;
  if (!open_context || g.compute_mode == ComputeMode::kProhibited || g.error != cuda_error::kSuccess) return g;
  // What a run does first: make the GPU current (CUDA 12+ creates its primary context here).
  if (!Ok(cudaSetDevice(index), "cudaSetDevice", &g) || !Ok(cudaFree(nullptr), "cudaFree(nullptr)", &g)) return g;
  size_t free_bytes = 0, total_bytes = 0;
  if (Ok(cudaMemGetInfo(&free_bytes, &total_bytes), "cudaMemGetInfo", &g)) {
    g.free_bytes = static_cast<int64_t>(free_bytes);
  }
  (void)Ok(cudaDeviceReset(), "cudaDeviceReset", &g);  // give the context back
  return g;
}

}  // namespace

CudaProbe ProbeCuda(bool open_contexts) {
  // The version and device queries below initialize CUDA, which fixes the module loading mode:
  // the command's probe comes before its device, so the choice must come before the probe.
  kernels::PreferEagerModuleLoading();
  CudaProbe p;
  p.have_backend = true;
  p.have_nccl = STAGECRAFT_WITH_NCCL != 0;
  p.architectures = STAGECRAFT_CUDA_ARCHITECTURES;
  if (const char* visible = std::getenv("CUDA_VISIBLE_DEVICES"); visible != nullptr) p.visible_devices = visible;
  // Neither version query needs a device; a failure leaves the version at 0 (none).
  (void)cudaRuntimeGetVersion(&p.runtime_version);
  if (cudaDriverGetVersion(&p.driver_version) != cudaSuccess) p.driver_version = 0;
#if STAGECRAFT_WITH_NCCL
  if (ncclGetVersion(&p.nccl_version) != ncclSuccess) p.nccl_version = 0;
#endif
  int count = 0;
  const cudaError_t status = cudaGetDeviceCount(&count);
  if (status != cudaSuccess) {
    (void)cudaGetLastError();
    p.count_error = static_cast<int>(status);
    p.count_error_text = std::string(cudaGetErrorName(status)) + " '" + cudaGetErrorString(status) + "'";
    return p;
  }
  for (int i = 0; i < count; ++i) p.gpus.push_back(ProbeGpu(i, open_contexts));
  return p;
}

}  // namespace stagecraft::exec
