// What the cuda backend's collective groups (nccl_replica_group.cpp, nccl_all_to_all.cpp) share:
// the group's non-blocking NCCL communicator with a stream of its own (MakeNcclGroupComm), the
// stream ordered after the compute stream's work queued so far before a collective, and each
// collective in flight with the event of its end, the compute stream ordered after that event
// once Test sees it. Waits are polled under the deadline; a failure or the deadline aborts every
// NCCL communicator of the process. Every CUDA and NCCL call is checked.
#pragma once

#include <cuda_runtime.h>
#include <nccl.h>

#include <chrono>
#include <cstdint>
#include <string>

#include "cuda_event_pool.h"
#include "nccl_comms.h"
#include "stagecraft/exec/device.h"
#include "stagecraft/exec/element_type.h"
#include "stagecraft/exec/handle_pool.h"
#include "stagecraft/exec/transport.h"

namespace stagecraft::exec {

class NcclCollectives {
 public:
  // What messages call the collective ("all-reduce"), the group's members ("replicas") and one
  // member ("replica").
  struct Names {
    const char* collective;
    const char* members;
    const char* member;
  };

  // The communicator of the group's `ranks` processes, this one `rank`, made under the deadline
  // from an id that rank 0 makes and broadcasts over `host` (MakeNcclGroupComm, the communicator
  // named `comm_name`); the collectives are ordered with `device`'s compute stream.
  NcclCollectives(Transport& host, int ranks, int rank, Device& device, std::chrono::nanoseconds deadline,
                  const std::string& comm_name, Names names);
  // Best effort and bounded: the collectives in flight are given their time (CloseNcclGroupComm).
  ~NcclCollectives();
  NcclCollectives(const NcclCollectives&) = delete;
  NcclCollectives& operator=(const NcclCollectives&) = delete;

  CommSet::Id id() const { return group_.comm; }
  ncclComm_t comm() const { return static_cast<ncclComm_t>(NcclComms().Get(group_.comm)); }
  cudaStream_t stream() const { return group_.stream; }
  int64_t deadline_ns() const { return deadline_ns_; }
  // The end of the last collective Test saw complete, on the compute stamps' origin (-1: none).
  int64_t completed_ns() const { return completed_ns_; }

  // Orders the stream after the compute stream's work queued so far (which made the inputs and
  // may still read the outputs).
  void After();
  // The handle of the collective of `elements` of `type` just enqueued on the stream.
  int Enqueued(int64_t elements, ElementType type);
  // Whether collective `handle` completed; once it has, the compute stream is ordered after it
  // and `handle` is released.
  bool Test(int handle);
  // Waits for `handle` (Test) under the deadline; past it aborts every communicator and throws
  // TimeoutError naming the collective's elements and the group's `members`.
  void Wait(int handle, int members);
  // Aborts every NCCL communicator of the process and throws `what`.
  [[noreturn]] static void Fail(const std::string& what);

 private:
  struct Pending {
    cudaEvent_t done = nullptr;  // null once released
    int64_t elements = 0;        // for a deadline's message
    ElementType type = ElementType::kF32;
  };
  Pending& At(int handle);

  Device& device_;
  cudaStream_t compute_;
  const int64_t deadline_ns_;
  const Names names_;
  const NcclGroupComm group_;
  // Destroyed after the destructor's body has given the collectives in flight their time:
  // orderings, and the collectives' ends (timed: CudaEventNs).
  CudaEventPool events_;
  CudaEventPool done_events_{cudaEventDefault};
  HandlePool<Pending> pending_;
  int64_t completed_ns_ = -1;
};

}  // namespace stagecraft::exec
