// CudaStreams (cuda_parts.h): the cuda device's compute stream and its copy streams.
#include <cuda_runtime.h>

#include "cuda_parts.h"
#include "stagecraft/kernels/cuda_check.h"

namespace stagecraft::exec {

CudaStreams::CudaStreams() { SC_CUDA_CHECK(cudaStreamCreateWithFlags(&streams_[0], cudaStreamNonBlocking)); }

// Best effort: a destructor must not throw. The device drains the compute stream (bounded) first.
CudaStreams::~CudaStreams() {
  for (cudaStream_t stream : streams_) {
    if (stream != nullptr) (void)cudaStreamDestroy(stream);
  }
}

cudaStream_t CudaStreams::Get(StreamKind kind) {
  cudaStream_t& stream = streams_[Index(kind)];
  if (stream == nullptr) SC_CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  return stream;
}

// A copy stream never used has nothing queued: no stream is made to wait on.
void CudaStreams::Synchronize(StreamKind kind) {
  const cudaStream_t stream = streams_[Index(kind)];
  if (stream != nullptr) SC_CUDA_CHECK(cudaStreamSynchronize(stream));
}

bool CudaStreams::Idle(StreamKind kind) {
  const cudaStream_t stream = streams_[Index(kind)];
  if (stream == nullptr) return true;
  const cudaError_t state = cudaStreamQuery(stream);
  if (state == cudaErrorNotReady) return false;
  SC_CUDA_CHECK(state);
  return true;
}

// The event may be recorded again once the wait on it is queued (cuda_event_pool.h).
void CudaStreams::OrderAfter(StreamKind waiter, StreamKind producer) {
  const cudaStream_t from = streams_[Index(producer)];
  if (waiter == producer || from == nullptr) return;  // nothing queued on a stream not yet made
  const cudaEvent_t event = order_events_.Take();
  SC_CUDA_CHECK(cudaEventRecord(event, from));
  SC_CUDA_CHECK(cudaStreamWaitEvent(Get(waiter), event, 0));
  order_events_.Give(event);
}

// A fence is an event recorded on the stream (ordering only, no timing).
DeviceStreams::Fence CudaStreams::MakeFence(StreamKind kind) {
  const cudaEvent_t event = fence_events_.Take();
  SC_CUDA_CHECK(cudaEventRecord(event, Get(kind)));
  return event;
}

bool CudaStreams::FenceReached(Fence fence) {
  const cudaError_t state = cudaEventQuery(static_cast<cudaEvent_t>(fence));
  if (state == cudaErrorNotReady) return false;
  SC_CUDA_CHECK(state);
  return true;
}

void CudaStreams::DropFence(Fence fence) { fence_events_.Give(static_cast<cudaEvent_t>(fence)); }

}  // namespace stagecraft::exec
