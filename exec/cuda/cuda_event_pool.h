// Reusable CUDA events: for ordering streams (no timing, the default), or for completions that
// are also timed (cudaEventDefault: CudaEventNs reads them). The NCCL transport and the NCCL
// replica group take one per wait or completion and give it back once it may be recorded again.
// Every event made is destroyed with the pool, best effort (a destructor must not throw).
#pragma once

#include <cuda_runtime.h>

#include <vector>

#include "stagecraft/kernels/cuda_check.h"

namespace stagecraft::exec {

class CudaEventPool {
 public:
  // `flags` for cudaEventCreateWithFlags: cudaEventDisableTiming for ordering only.
  explicit CudaEventPool(unsigned flags = cudaEventDisableTiming) : flags_(flags) {}
  ~CudaEventPool() {
    for (cudaEvent_t e : events_) (void)cudaEventDestroy(e);
  }
  CudaEventPool(const CudaEventPool&) = delete;
  CudaEventPool& operator=(const CudaEventPool&) = delete;

  // One given back, else a new one.
  cudaEvent_t Take() {
    if (!free_.empty()) {
      cudaEvent_t e = free_.back();
      free_.pop_back();
      return e;
    }
    cudaEvent_t e = nullptr;
    SC_CUDA_CHECK(cudaEventCreateWithFlags(&e, flags_));
    events_.push_back(e);
    return e;
  }
  // `e` may be recorded again: a stream's wait on it is queued, or it has completed.
  void Give(cudaEvent_t e) { free_.push_back(e); }

 private:
  unsigned flags_;
  std::vector<cudaEvent_t> events_;  // every event made
  std::vector<cudaEvent_t> free_;
};

}  // namespace stagecraft::exec
