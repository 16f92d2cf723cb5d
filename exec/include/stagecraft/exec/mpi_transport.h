// The cpu backend's Transport over MPI (OpenMPI). MpiSession owns MPI_Init/MPI_Finalize for
// the process; every MPI call is checked and a failure throws with the host, file:line and
// MPI's error string. mpi.h stays out of this header.
#pragma once

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "stagecraft/exec/transport.h"

namespace stagecraft::exec {

class MpiSession {
 public:
  MpiSession(int* argc, char*** argv);
  ~MpiSession();  // MPI_Finalize, unless Abort ran
  MpiSession(const MpiSession&) = delete;
  MpiSession& operator=(const MpiSession&) = delete;
};

// Requires a live MpiSession. Communicates over MPI_COMM_WORLD. A Wait (or Barrier) that takes
// longer than `deadline` cancels a pending receive and throws, naming the peer and the tag.
std::unique_ptr<Transport> MakeMpiTransport(std::chrono::nanoseconds deadline = kDefaultWaitDeadline);

// This process's rank and the world size, also usable before any Transport exists.
int MpiWorldRank();
int MpiWorldSize();
// This process's rank among the processes of its node (MPI_COMM_TYPE_SHARED), and how many
// processes the node runs.
int MpiLocalRank();
int MpiLocalSize();
// Whether `mine` holds on every rank of the job (collective).
bool MpiOnEveryRank(bool mine);
// Every process of this node's `mine` (at most 255 bytes), in node-rank order (collective).
std::vector<std::string> MpiGatherOnNode(const std::string& mine);
std::string HostName();

}  // namespace stagecraft::exec
