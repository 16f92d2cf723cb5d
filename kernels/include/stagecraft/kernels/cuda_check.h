// SC_CUDA_CHECK(call): every CUDA runtime call goes through it. A failure throws
// std::runtime_error naming the host, file:line, the call and CUDA's error string (as nccl-tests).
#pragma once

#include <cuda_runtime.h>
#include <unistd.h>

#include <stdexcept>
#include <string>

namespace stagecraft::kernels {

// This machine's name, for the messages of the cuda backend's checked calls.
inline std::string HostName() {
  char host[256] = "unknown-host";
  if (gethostname(host, sizeof(host)) != 0) host[0] = '\0';
  host[sizeof(host) - 1] = '\0';
  return host;
}

// "<host>: <file>:<line>: CUDA error <name> '<message>' in <call>".
inline std::string CudaErrorText(cudaError_t error, const char* call, const char* file, int line) {
  return HostName() + ": " + file + ":" + std::to_string(line) + ": CUDA error " + cudaGetErrorName(error) +
         " '" + cudaGetErrorString(error) + "' in " + call;
}

[[noreturn]] inline void ThrowCudaError(cudaError_t error, const char* call, const char* file, int line) {
  throw std::runtime_error(CudaErrorText(error, call, file, line));
}

}  // namespace stagecraft::kernels

#define SC_CUDA_CHECK(call)                                                                 \
  do {                                                                                      \
    const cudaError_t sc_cuda_status = (call);                                              \
    if (sc_cuda_status != cudaSuccess) {                                                    \
      ::stagecraft::kernels::ThrowCudaError(sc_cuda_status, #call, __FILE__, __LINE__);     \
    }                                                                                       \
  } while (0)
