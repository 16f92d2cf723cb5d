// Checked MPI calls for the exec sources that talk to MPI (mpi_transport.cpp,
// mpi_replica_group.cpp): a failure throws with the host, file:line, the call and MPI's error
// string. Private to exec/src, so that mpi.h stays out of the public headers.
#pragma once

#include <mpi.h>

#include <stdexcept>
#include <string>

#include <fmt/format.h>

#include "stagecraft/exec/mpi_transport.h"

namespace stagecraft::exec {

[[noreturn]] inline void MpiFailed(int code, const char* call, const char* file, int line) {
  char text[MPI_MAX_ERROR_STRING];
  int length = 0;
  MPI_Error_string(code, text, &length);
  throw std::runtime_error(
      fmt::format("{}: {}:{}: {} failed: {}", HostName(), file, line, call, std::string(text, length)));
}

}  // namespace stagecraft::exec

#define SC_MPI_CHECK(call)                                                                          \
  do {                                                                                              \
    const int sc_mpi_rc = (call);                                                                   \
    if (sc_mpi_rc != MPI_SUCCESS) ::stagecraft::exec::MpiFailed(sc_mpi_rc, #call, __FILE__, __LINE__); \
  } while (0)
