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

inline void CheckCublas(cublasStatus_t status, const char* call, const char* file, int line) {
  if (status != CUBLAS_STATUS_SUCCESS) ThrowCublasError(status, call, file, line);
}

}  // namespace stagecraft::exec

// The call is evaluated once, where it stands.
#define SC_CUBLAS_CHECK(call) ::stagecraft::exec::CheckCublas((call), #call, __FILE__, __LINE__)
