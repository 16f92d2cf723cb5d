// SC_CUBLAS_CHECK: a cuBLAS call whose failure throws with the host, file:line, the call and
// cuBLAS's own status name and message (private to the cuda backend).
#pragma once

#include <cublas_v2.h>

#include <stdexcept>
#include <string>

#include "stagecraft/kernels/cuda_check.h"

namespace stagecraft::exec {

[[noreturn]] inline void ThrowCublasError(cublasStatus_t status, const char* call, const char* file, int line) {
  throw std::runtime_error(kernels::HostName() + ": " + file + ":" + std::to_string(line) + ": cuBLAS error " +
                           cublasGetStatusName(status) + " '" + cublasGetStatusString(status) + "' in " + call);
}

}  // namespace stagecraft::exec

#define SC_CUBLAS_CHECK(call)                                                            \
  do {                                                                                   \
    const cublasStatus_t sc_cublas_status = (call);                                      \
    if (sc_cublas_status != CUBLAS_STATUS_SUCCESS) {                                     \
      ::stagecraft::exec::ThrowCublasError(sc_cublas_status, #call, __FILE__, __LINE__); \
    }                                                                                    \
  } while (0)
