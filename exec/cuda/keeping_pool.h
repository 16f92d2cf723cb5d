// The cuda device's stream-ordered memory (private to cuda_device.cpp): a memory pool of the
// device's own that keeps whatever is freed into it, and a bounded wait for a stream to drain.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <stdexcept>
#include <string>

#include "stagecraft/exec/poll.h"
#include "stagecraft/kernels/cuda_check.h"

namespace stagecraft::exec {

// A pool on GPU `gpu` for cudaMallocFromPoolAsync that keeps what is freed into it (release
// threshold at its maximum) until it is destroyed: a run never hands memory back to the driver
// and asks again, and no allocation waits for the device (cudaMalloc would, NCCL's kernels
// included). Throws when the GPU has no stream-ordered allocator.
inline cudaMemPool_t MakeKeepingPool(int gpu) {
  int supported = 0;
  SC_CUDA_CHECK(cudaDeviceGetAttribute(&supported, cudaDevAttrMemoryPoolsSupported, gpu));
  if (supported == 0) {
    throw std::runtime_error(kernels::HostName() + ": GPU " + std::to_string(gpu) +
                             " has no stream-ordered memory allocator (cudaDevAttrMemoryPoolsSupported is 0), "
                             "which the cuda backend allocates with");
  }
  cudaMemPoolProps props{};
  props.allocType = cudaMemAllocationTypePinned;
  props.handleTypes = cudaMemHandleTypeNone;
  props.location.type = cudaMemLocationTypeDevice;
  props.location.id = gpu;
  cudaMemPool_t pool = nullptr;
  SC_CUDA_CHECK(cudaMemPoolCreate(&pool, &props));
  uint64_t keep_all = UINT64_MAX;
  cudaError_t set = cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &keep_all);
  const char* what = "cudaMemPoolSetAttribute(cudaMemPoolAttrReleaseThreshold)";
  // A block freed on one stream and still pending there is never handed to another stream with
  // a wait on the first inserted (the allocator's internal dependencies): an allocation made on
  // the side stream while a step is captured, then synchronised, would wait on the compute
  // stream's queue, which may hold a step waiting on a peer.
  int no_internal_waits = 0;
  if (set == cudaSuccess) {
    set = cudaMemPoolSetAttribute(pool, cudaMemPoolReuseAllowInternalDependencies, &no_internal_waits);
    what = "cudaMemPoolSetAttribute(cudaMemPoolReuseAllowInternalDependencies)";
  }
  if (set != cudaSuccess) {
    (void)cudaMemPoolDestroy(pool);
    kernels::ThrowCudaError(set, what, __FILE__, __LINE__);
  }
  return pool;
}

// Whether `stream` has run everything queued on it, polled for at most `bound_ns` (an error
// counts as drained: there is nothing left to wait for).
inline bool StreamDrained(cudaStream_t stream, int64_t bound_ns) {
  const PollPolicy policy{.deadline_ns = bound_ns, .spin_ns = 100'000, .min_sleep_ns = 20'000,
                          .max_sleep_ns = 10'000'000};
  return PollUntil([&] { return cudaStreamQuery(stream) != cudaErrorNotReady; }, policy);
}

}  // namespace stagecraft::exec
