// Checked MPI calls for the exec sources that talk to MPI (mpi_transport.cpp, mpi_replica_group.cpp,
// mpi_all_to_all.cpp): a failure throws with the host, file:line, the call and MPI's error
// string; and how the collective groups test and wait for their pending collectives. Private to
// exec/src, so that mpi.h stays out of the public headers.
#pragma once

#include <mpi.h>

#include <cstdint>
#include <stdexcept>
#include <string>

#include <fmt/format.h>

#include "stagecraft/base/check.h"
#include "stagecraft/exec/element_type.h"
#include "stagecraft/exec/handle_pool.h"
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

// What a collective group's messages call its collective ("all-reduce"), its members
// ("replicas") and one member ("replica").
struct CollectiveNames {
  const char* collective;
  const char* members;
  const char* member;
};

// A collective group's pending collectives are kept in a HandlePool of a Pending with its
// `request`, and its `elements` and their `type` for a deadline's message.
// Whether the pending `handle` completed (MpiTestRequest); a completed one is released.
template <class Pending>
bool TestPending(HandlePool<Pending>& pending, int handle, const CollectiveNames& names) {
  SC_CHECK(pending.Live(handle), fmt::format("a pending {}", names.collective));
  const bool done = MpiTestRequest(&pending[handle].request);
  if (done) pending.Release(handle);
  return done;
}

// Waits for the pending `handle` of a group of `members` (TestPending) under `deadline_ns`
// (PollCollective); past it throws TimeoutError. A pending collective cannot be cancelled: the
// job ends (the caller aborts it).
template <class Pending>
void WaitPending(HandlePool<Pending>& pending, int handle, int members, int64_t deadline_ns,
                 const CollectiveNames& names) {
  if (PollCollective(deadline_ns, [&] { return TestPending(pending, handle, names); })) return;
  const Pending& p = pending[handle];
  throw TimeoutError(fmt::format("the MPI {} of {} over {} {} did not complete within {:g} s: a {} is hung or gone",
                                 names.collective, ElementCountText(p.elements, p.type), members, names.members,
                                 static_cast<double>(deadline_ns) * 1e-9, names.member));
}

}  // namespace stagecraft::exec

#define SC_MPI_CHECK(call)                                                                          \
  do {                                                                                              \
    const int sc_mpi_rc = (call);                                                                   \
    if (sc_mpi_rc != MPI_SUCCESS) ::stagecraft::exec::MpiFailed(sc_mpi_rc, #call, __FILE__, __LINE__); \
  } while (0)
