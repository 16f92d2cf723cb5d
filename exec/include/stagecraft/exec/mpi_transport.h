// The cpu backend's Transport over MPI (OpenMPI). MpiSession owns MPI_Init/MPI_Finalize for
// the process; every MPI call is checked and a failure throws with the host, file:line and
// MPI's error string. mpi.h stays out of this header.
#pragma once

#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "stagecraft/exec/mpi_group.h"
#include "stagecraft/exec/transport.h"

namespace stagecraft::exec {

class MpiSession {
 public:
  MpiSession(int* argc, char*** argv);
  ~MpiSession();  // MPI_Finalize, unless Abort ran
  MpiSession(const MpiSession&) = delete;
  MpiSession& operator=(const MpiSession&) = delete;
};

// How much of one rank's text a Gather or Broadcast moves in one MPI call: MPI counts are int,
// so a text of any size travels in pieces (a rank's measurements of a long run, or of a large
// model's weights, pass 2^31 bytes).
inline constexpr int64_t kDefaultPieceBytes = int64_t{1} << 30;

// A part of the job as MPI_Comm_split names it (the older name of GroupKey).
using MpiSplit = GroupKey;

// Requires a live MpiSession. Point-to-point and the host collectives over `group`'s own
// communicator: transports made over one group match each other's messages and collectives, as
// every transport over the world always has (a test's idle ranks meet a run's over a second);
// one over group.Dup() keeps its traffic apart. Collective over the whole job (it asks how many
// processes share this node); Abort still ends the whole job. A Wait (or
// Barrier) that takes longer than `deadline` cancels a pending receive and throws, naming the
// peer and the tag. `piece_bytes` (at least 1) bounds one MPI call of Gather and Broadcast
// (tests lower it). Every element type moves (mpi_element_type.h).
std::unique_ptr<Transport> MakeMpiTransport(const MpiGroup& group,
                                            std::chrono::nanoseconds deadline = kDefaultWaitDeadline,
                                            int64_t piece_bytes = kDefaultPieceBytes);
// The same over the world (MpiGroup::World()), or, given `split`, over the world's part it names
// (collective over the job, every process naming its part).
std::unique_ptr<Transport> MakeMpiTransport(std::chrono::nanoseconds deadline = kDefaultWaitDeadline,
                                            int64_t piece_bytes = kDefaultPieceBytes,
                                            std::optional<MpiSplit> split = std::nullopt);

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
