// Backend choice and the per-process device and transport (backend.h).
#include "stagecraft/exec/backend.h"

#include <fmt/format.h>

#include "stagecraft/base/error.h"
#include "stagecraft/exec/cpu_device.h"
#include "stagecraft/exec/cuda_device.h"
#include "stagecraft/exec/mpi_transport.h"
#include "stagecraft/exec/nccl_transport.h"
#include "stagecraft/exec/staged_transport.h"

namespace stagecraft::exec {

Backend ChooseBackend(std::string_view flag, int cuda_devices, bool have_cuda_backend) {
  if (flag == "cpu") return Backend::kCpu;
  if (flag == "auto") return cuda_devices > 0 ? Backend::kCuda : Backend::kCpu;
  if (flag != "cuda") throw InputError(fmt::format("--backend: expected cpu, cuda or auto, got '{}'", flag));
  if (!have_cuda_backend) {
    throw InputError("--backend cuda: this build has no cuda backend (the CUDA toolkit was not found when it was configured)");
  }
  if (cuda_devices == 0) throw InputError("--backend cuda: no CUDA device was found");
  return Backend::kCuda;
}

void CheckDtype(const sim::Scenario& sc, Backend backend) {
  const std::string& dtype = sc.training.dtype;
  if (backend == Backend::kCpu && dtype != "fp32") {
    throw InputError(fmt::format("{}: training.dtype: the cpu executor trains in fp32, got {}", sc.path, dtype));
  }
  if (backend == Backend::kCuda && !GemmPrecisionFor(dtype)) {
    throw InputError(
        fmt::format("{}: training.dtype: the cuda executor trains in fp32, tf32, bf16 or fp16, got {}", sc.path, dtype));
  }
}

bool EveryProcessHasItsOwnGpu(int gpu) {
  return MpiOnEveryRank(GpusAreDistinct(MpiGatherOnNode(CudaPciBusId(gpu))));
}

ProcessRuntime MakeProcessRuntime(Backend backend, const sim::Scenario& sc, std::chrono::nanoseconds deadline) {
  ProcessRuntime rt;
  if (backend == Backend::kCpu) {
    rt.device = MakeCpuDevice();
    rt.transport = MakeMpiTransport(deadline);
    return rt;
  }
  const GemmPrecision precision = GemmPrecisionFor(sc.training.dtype).value_or(GemmPrecision::kFp32);
  const int gpus = CudaDeviceCount();
  const int gpu = GpuForLocalRank(MpiLocalRank(), gpus);
  rt.device = MakeCudaDevice(gpu, precision);
  if (HaveNccl() && EveryProcessHasItsOwnGpu(gpu)) {
    rt.transport = MakeNcclTransport(MakeMpiTransport(deadline), *rt.device, deadline);
  } else {
    rt.transport = MakeStagedTransport(MakeMpiTransport(deadline), *rt.device);
  }
  return rt;
}

}  // namespace stagecraft::exec
