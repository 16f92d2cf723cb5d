// CudaGraphs (cuda_parts.h): the cuda device's graphs part (device_graphs.h), CUDA stream capture
// of the compute stream. A capture is relaxed (cudaStreamCaptureModeRelaxed): the memory part
// may take a block from the pool on a stream of its own while it is open, and a call that cannot
// be recorded (one that waits for the capturing stream) fails the capture, which EndCapture
// reports. Every call is checked.
#include <cuda_runtime.h>

#include <stdexcept>
#include <string>

#include "cuda_parts.h"
#include "stagecraft/kernels/cuda_check.h"

namespace stagecraft::exec {

CudaGraphs::~CudaGraphs() {
  AbandonCapture();
  for (Instances& instances : execs_) Destroy(&instances);
}

void CudaGraphs::Destroy(Instances* instances) {
  for (cudaGraphExec_t& exec : *instances) {
    if (exec != nullptr) (void)cudaGraphExecDestroy(exec);
    exec = nullptr;
  }
}

void CudaGraphs::Capturing(bool on) {
  capturing_ = on;
  memory_.SetCapturing(on);
  stamps_.SetCapturing(on);
}

void CudaGraphs::BeginCapture() {
  if (capturing_) throw std::logic_error("CudaGraphs: a capture is already open");
  context_.PrepareForCapture();
  SC_CUDA_CHECK(cudaStreamBeginCapture(stream_, cudaStreamCaptureModeRelaxed));
  Capturing(true);
}

int CudaGraphs::EndCapture() {
  if (!capturing_) throw std::logic_error("CudaGraphs: no capture is open");
  Capturing(false);
  cudaGraph_t graph = nullptr;
  const cudaError_t ended = cudaStreamEndCapture(stream_, &graph);
  if (ended != cudaSuccess) {
    (void)cudaGetLastError();  // the next launcher's check would report it again
    if (graph != nullptr) (void)cudaGraphDestroy(graph);
    kernels::ThrowCudaError(ended,
                            "cudaStreamEndCapture (a call made while capturing a step could not be recorded; "
                            "`execute --graphs off` issues every call as it comes)",
                            __FILE__, __LINE__);
  }
  // Each instance is the one graph instantiated again, its stamps' nodes retargeted in the
  // executable graph (no clone: cloning is not supported for every node a library may record
  // into a capture).
  Instances instances{};
  try {
    for (int instance = 0; instance < kInstances; ++instance) {
      cudaGraphExec_t& exec = instances[static_cast<size_t>(instance)];
      SC_CUDA_CHECK(cudaGraphInstantiate(&exec, graph, 0));
      if (instance > 0) stamps_.RetargetStamps(graph, exec, instance);
    }
  } catch (...) {
    (void)cudaGraphDestroy(graph);
    Destroy(&instances);
    throw;
  }
  (void)cudaGraphDestroy(graph);  // the instances stand alone; a failure here must not leak them
  execs_.push_back(instances);
  return static_cast<int>(execs_.size()) - 1;
}

void CudaGraphs::AbandonCapture() noexcept {
  if (!capturing_) return;
  Capturing(false);
  cudaGraph_t graph = nullptr;
  (void)cudaStreamEndCapture(stream_, &graph);
  if (graph != nullptr) (void)cudaGraphDestroy(graph);
  (void)cudaGetLastError();  // the stream is usable again; the failure was reported by the caller
}

void CudaGraphs::Launch(int segment, int instance) {
  if (segment < 0 || segment >= segments() || instance < 0 || instance >= kInstances) {
    throw std::out_of_range("CudaGraphs: no segment " + std::to_string(segment) + " instance " +
                            std::to_string(instance));
  }
  SC_CUDA_CHECK(cudaGraphLaunch(execs_[static_cast<size_t>(segment)][static_cast<size_t>(instance)], stream_));
}

void CudaGraphs::Release() {
  AbandonCapture();
  for (Instances& instances : execs_) Destroy(&instances);
  execs_.clear();
  memory_.ReleaseGraphBlocks();
  stamps_.ClearGraphStamps();
}

}  // namespace stagecraft::exec
