// Checked NCCL calls for the cuda backend's NCCL users (nccl_comms.cpp, nccl_transport.cpp,
// nccl_replica_group.cpp): a failure throws with the host, file:line, the call, NCCL's error
// string and the communicator's last error. SC_NCCL_CHECK is for calls that take no
// non-blocking communicator (ncclGetUniqueId): anything but ncclSuccess fails. A call that
// enqueues work on a communicator goes through SC_NCCL_ENQUEUE (nccl_comms.h), which waits out
// ncclInProgress under the deadline and aborts every communicator on an error.
#pragma once

#include <nccl.h>

#include <stdexcept>
#include <string>

#include "stagecraft/kernels/cuda_check.h"

namespace stagecraft::exec {

inline std::string NcclWhere(const char* file, int line) {
  return kernels::HostName() + ": " + file + ":" + std::to_string(line) + ": ";
}

inline std::string NcclErrorText(ncclResult_t result, ncclComm_t comm, const char* call, const char* file,
                                 int line) {
  std::string text = NcclWhere(file, line) + "NCCL error '" + ncclGetErrorString(result) + "' in " + call;
  const char* last = ncclGetLastError(comm);
  if (last != nullptr && last[0] != '\0') text += std::string(": ") + last;
  return text;
}

}  // namespace stagecraft::exec

#define SC_NCCL_CHECK(comm, call)                                                         \
  do {                                                                                    \
    const ncclResult_t sc_nccl_result = (call);                                           \
    if (sc_nccl_result != ncclSuccess) {                                                  \
      throw std::runtime_error(::stagecraft::exec::NcclErrorText(sc_nccl_result, comm, #call, __FILE__, __LINE__)); \
    }                                                                                     \
  } while (0)
