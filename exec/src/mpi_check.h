// Checked MPI calls for the exec sources that talk to MPI (mpi_transport.cpp, mpi_replica_group.cpp,
// mpi_all_to_all.cpp): a failure throws with the host, file:line, the call and MPI's error
// string. Private to exec/src, so that mpi.h stays out of the public headers.
#pragma once

#include <mpi.h>

#include <cstdint>
#include <stdexcept>
#include <string>

#include <fmt/format.h>

#include "stagecraft/exec/mpi_transport.h"
#include "stagecraft/exec/poll.h"

namespace stagecraft::exec {

[[noreturn]] inline void MpiFailed(int code, const char* call, const char* file, int line) {
  char text[MPI_MAX_ERROR_STRING];
  int length = 0;
  MPI_Error_string(code, text, &length);
  throw std::runtime_error(
      fmt::format("{}: {}:{}: {} failed: {}", HostName(), file, line, call, std::string(text, length)));
}

// Whether a pending MPI collective's `request` completed (MPI_Test, which also drives MPI's
// progress); a completed one is set to MPI_REQUEST_NULL by MPI.
inline bool MpiTestRequest(MPI_Request* request) {
  int done = 0;
  const int rc = MPI_Test(request, &done, MPI_STATUS_IGNORE);
  if (rc != MPI_SUCCESS) MpiFailed(rc, "MPI_Test", __FILE__, __LINE__);
  return done != 0;
}

// How the collective groups wait (mpi_replica_group.cpp, mpi_all_to_all.cpp), as MpiTransport
// does: a few microseconds of spinning, then sleeps that leave the core to a rank sharing it
// (a collective needs its peers to run); true when `test` held within `deadline_ns`.
template <class Test>
bool PollCollective(int64_t deadline_ns, Test test) {
  const PollPolicy policy{.deadline_ns = deadline_ns, .spin_ns = 20'000, .min_sleep_ns = 2'000, .max_sleep_ns = 50'000};
  return PollUntil(test, policy);
}

}  // namespace stagecraft::exec

#define SC_MPI_CHECK(call)                                                                          \
  do {                                                                                              \
    const int sc_mpi_rc = (call);                                                                   \
    if (sc_mpi_rc != MPI_SUCCESS) ::stagecraft::exec::MpiFailed(sc_mpi_rc, #call, __FILE__, __LINE__); \
  } while (0)
