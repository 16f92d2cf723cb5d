// CudaDevice (cuda_device.h): the cuda backend's parts put together (cuda_parts.h: streams,
// memory, clock and the layer ops' context; each in its own file), and the backend's entry
// points. Every CUDA and cuBLAS call is checked; a failure throws with the host, file:line, the
// call and the library's own message (the command adds the rank).
#include "stagecraft/exec/cuda_device.h"

#include <cuda_runtime.h>

#include <cstdint>
#include <cstdio>
#include <memory>
#include <stdexcept>
#include <string>

#include "cuda_parts.h"
#include "keeping_pool.h"
#include "stagecraft/kernels/cuda.h"
#include "stagecraft/kernels/cuda_check.h"

namespace stagecraft::exec {
namespace {

class CudaDevice final : public Device {
 public:
  CudaDevice(int gpu, GemmPrecision precision) : gpu_(gpu) {
    kernels::PreferEagerModuleLoading();  // before this process's first CUDA call (cuda.h)
    SC_CUDA_CHECK(cudaSetDevice(gpu));
    cudaDeviceProp prop{};
    SC_CUDA_CHECK(cudaGetDeviceProperties(&prop, gpu));
    name_ = prop.name;
    streams_ = std::make_unique<CudaStreams>();
    memory_ = std::make_unique<CudaMemory>(gpu, *streams_);
    context_ = std::make_unique<CudaOpContext>(streams_->compute(), precision, *memory_);
    clock_ = std::make_unique<CudaClock>(streams_->compute(), *streams_);
    graphs_ = std::make_unique<CudaGraphs>(streams_->compute(), clock_->stamps(), *memory_, *context_);
    kernels::PreloadKernels();  // ours load now whatever the mode; cuBLAS's only when eager
    kernels::WarnIfEagerLoadingDidNotTakeHold();
  }

  // How long the destructor lets the compute stream drain.
  static constexpr int64_t kDrainNs = 10'000'000'000;

  // Best effort, and bounded: the run is over (or failing), and a destructor must neither throw
  // nor wait for good on a queue held by a transfer that never comes (a peer gone; its
  // communicators are aborted before the device goes). Past the bound the memory is left to the
  // driver, which frees it when the process ends. The parts go in this order: what is queued on
  // the compute stream first, the stream itself next to last, the memory pool last.
  ~CudaDevice() override {
    const cudaStream_t stream = streams_->compute();
    if (StreamDrained(stream, kDrainNs)) {
      try {
        graphs_->Release();
      } catch (const std::exception&) {  // a device gone bad: the error that made it so was reported
      }
      memory_->FreeKeptAtExit();
      context_->ReleaseHalvesAtExit();
      memory_->FreeWorkspaceAtExit();
      if (StreamDrained(stream, kDrainNs)) context_->DestroyBlasAtExit();  // it may wait for the whole device
    }
    graphs_.reset();
    context_.reset();
    clock_.reset();
    streams_.reset();
    memory_.reset();
  }

  std::string Name() const override { return "cuda:" + std::to_string(gpu_) + " (" + name_ + ")"; }
  DeviceMemory& memory() override { return *memory_; }
  DeviceStreams& streams() override { return *streams_; }
  DeviceClock& clock() override { return *clock_; }
  const LayerOps& ops() const override { return LayerOpsFor(OpBackend::kCuda); }
  OpContext& op_context() override { return *context_; }
  DeviceGraphs* graphs() override { return graphs_.get(); }

  cudaStream_t compute_stream() const { return streams_->compute(); }
  int64_t EventNs(cudaEvent_t event) { return clock_->EventNs(event); }
  int StampOn(cudaStream_t stream) { return clock_->stamps().Stamp(stream); }
  int64_t PoolReservedBytes() const { return memory_->PoolReservedBytes(); }
  int64_t FusedCalls() const { return context_->lt().calls(); }

 private:
  int gpu_;
  std::string name_;
  std::unique_ptr<CudaStreams> streams_;
  std::unique_ptr<CudaMemory> memory_;
  std::unique_ptr<CudaOpContext> context_;
  std::unique_ptr<CudaClock> clock_;
  std::unique_ptr<CudaGraphs> graphs_;
};

}  // namespace

bool HaveCudaBackend() { return true; }

int CudaDeviceCount() {
  kernels::PreferEagerModuleLoading();  // this is often the process's first CUDA call
  int count = 0;
  const cudaError_t status = cudaGetDeviceCount(&count);
  if (status == cudaSuccess) return count;
  (void)cudaGetLastError();  // clear it: the process goes on without the cuda backend
  // No device, or no driver at all (the runtime then says "insufficient driver" too, with a
  // driver version of 0), is a machine without GPUs. Anything else is a GPU this build cannot
  // use (a driver older than the toolkit, a broken install): say so once, since the gpu tests
  // then skip and --backend auto runs on the CPU.
  int driver = 0;
  (void)cudaDriverGetVersion(&driver);
  const bool no_gpu = status == cudaErrorNoDevice || (status == cudaErrorInsufficientDriver && driver == 0);
  static const bool said = [&] {
    if (!no_gpu) {
      int runtime = 0;
      (void)cudaRuntimeGetVersion(&runtime);
      std::fprintf(stderr, "stagecraft: warning: CUDA is unusable here, treated as no GPU: %s (driver %d, runtime %d)\n",
                   kernels::CudaErrorText(status, "cudaGetDeviceCount", __FILE__, __LINE__).c_str(), driver, runtime);
    }
    return true;
  }();
  (void)said;
  return 0;
}

std::string CudaPciBusId(int gpu) {
  if (gpu < 0) return {};
  kernels::PreferEagerModuleLoading();
  char id[64] = {};
  SC_CUDA_CHECK(cudaDeviceGetPCIBusId(id, sizeof(id), gpu));
  return id;
}

// No range check of its own: cudaSetDevice's failure names the call and CUDA's message
// (cudaErrorInvalidDevice for a GPU this process does not see).
std::unique_ptr<Device> MakeCudaDevice(int gpu, GemmPrecision precision) {
  return std::make_unique<CudaDevice>(gpu, precision);
}

namespace {

// `device` as the cuda device it must be for `call`; std::invalid_argument naming both otherwise.
CudaDevice& AsCuda(Device& device, const char* call) {
  auto* cuda = dynamic_cast<CudaDevice*>(&device);
  if (cuda == nullptr) throw std::invalid_argument(std::string(call) + ": " + device.Name() + " is not a cuda device");
  return *cuda;
}

}  // namespace

void* CudaComputeStream(Device& device) { return AsCuda(device, "CudaComputeStream").compute_stream(); }

int64_t CudaPoolReservedBytes(Device& device) { return AsCuda(device, "CudaPoolReservedBytes").PoolReservedBytes(); }

int64_t CudaFusedCalls(Device& device) { return AsCuda(device, "CudaFusedCalls").FusedCalls(); }

int64_t CudaEventNs(Device& device, void* event) {
  return AsCuda(device, "CudaEventNs").EventNs(static_cast<cudaEvent_t>(event));
}

int CudaStampOn(Device& device, void* stream) {
  return AsCuda(device, "CudaStampOn").StampOn(static_cast<cudaStream_t>(stream));
}

}  // namespace stagecraft::exec
