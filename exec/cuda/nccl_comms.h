// The cuda backend's NCCL communicators (nccl_transport.cpp, nccl_replica_group.cpp): every one
// of this process in one CommSet over NCCL's calls (comm_set.h), so that a failure in any aborts
// them all; how each is configured (non-blocking, few CTAs) and how they are made (together, in
// one group, waited for under a deadline).
#pragma once

#include <cuda_runtime.h>
#include <nccl.h>

#include <cstdint>
#include <string>
#include <vector>

#include "stagecraft/exec/comm_set.h"
#include "stagecraft/exec/poll.h"

namespace stagecraft::exec {

// The CTAs (thread blocks, NCCL's channels) each communicator's kernels may take, whatever
// NCCL would pick: a pipeline's transfers are one tensor between two GPUs, and the GEMMs beside
// them on the same GPU (cuBLAS's persistent kernels) want its SMs. No thread block clusters
// either (cgaClusterSize 0, NCCL's default 4 on sm_90): a cluster's CTAs must be placed together,
// which waits for room on a GPU that cuBLAS fills. docs/executor.md states these numbers.
inline constexpr int kNcclMinCtas = 1;
inline constexpr int kNcclMaxCtas = 4;
inline constexpr int kNcclClusterSize = 0;

// How the transport and the replica group wait for their transfers and sums: back to back
// briefly, then sleeps between polls with a backoff (the caller sets the deadline). The runtime
// waits for one only at a step's read-back, a STEP or a run's end (a receive's consumer waits on
// the device), so the host's reaction time is not on the GPU's path.
inline constexpr PollPolicy kNcclPoll{.deadline_ns = 0, .spin_ns = 50'000, .min_sleep_ns = 20'000,
                                      .max_sleep_ns = 200'000};
// How long a destructor lets work in flight land, and communicators quiesce, before it aborts them.
inline constexpr int64_t kNcclCloseNs = 10'000'000'000;

// Whether every event of `events` (null ones skipped) completes within `deadline_ns`, polled as
// kNcclPoll: a destructor's bounded wait for what it has in flight.
bool EventsLand(const std::vector<cudaEvent_t>& events, int64_t deadline_ns);

// Every NCCL communicator of this process (made at first use).
CommSet& NcclComms();

// What every communicator is made with: non-blocking (each call returns at once; a wait is the
// caller's, under its deadline), CTAs and clusters as above.
ncclConfig_t NcclConfig();

struct NcclInit {
  ncclUniqueId id{};
  int ranks = 0;
  int rank = 0;
  std::string name;  // in messages: "the channel 0 -> 1"
};

// Makes the communicators of `inits` together (ncclCommInitRankConfig, non-blocking, inside one
// ncclGroupStart/End), adds them to NcclComms() and waits until every one is ready, polling under
// `deadline_ns`. A failure or the deadline aborts every communicator of the process and throws
// (CommSet::AwaitReady, `what` naming the wait).
std::vector<CommSet::Id> MakeNcclComms(const std::vector<NcclInit>& inits, int64_t deadline_ns,
                                       const std::string& what);

// A collective group's own communicator and stream (the replica group's, an all-to-all's): the
// unique id made by the group's rank 0 and broadcast over `host` (the group's MPI transport),
// the communicator made under `deadline_ns` (MakeNcclComms), a non-blocking stream beside the
// compute stream. `name` names the communicator in messages ("the replicas' NCCL communicator").
struct NcclGroupComm {
  CommSet::Id comm = -1;  // in NcclComms()
  cudaStream_t stream = nullptr;
};
NcclGroupComm MakeNcclGroupComm(Transport& host, int ranks, int rank, int64_t deadline_ns, const std::string& name);
// Best effort and bounded, for a destructor: lets `in_flight` land (else aborts every
// communicator of the process), closes the communicator and destroys the stream.
void CloseNcclGroupComm(const NcclGroupComm& group, const std::vector<cudaEvent_t>& in_flight, int64_t deadline_ns);

// After a call that enqueues work on communicator `id` returned `result`: ncclInProgress (it
// connects in the background) is waited out under `deadline_ns` before the communicator is used
// again, as NCCL requires; an error aborts every communicator and throws, naming `call` and
// where it was made.
void CheckEnqueued(CommSet::Id id, ncclResult_t result, const char* call, int64_t deadline_ns, const char* file,
                   int line);

}  // namespace stagecraft::exec

#define SC_NCCL_ENQUEUE(id, call, deadline_ns) \
  ::stagecraft::exec::CheckEnqueued((id), (call), #call, (deadline_ns), __FILE__, __LINE__)
