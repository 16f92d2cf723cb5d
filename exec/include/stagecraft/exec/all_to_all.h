// The all-to-all group: every rank of a group sends a block to every rank (an IR ALL_TO_ALL op,
// DESIGN.md §10: a mixture-of-experts layer's dispatch and combine over the expert-parallel
// ranks). Made over a group split from the world (mpi_group.h), typed (element_type.h).
//   cpu:  MPI_Ialltoall (equal blocks) or MPI_Ialltoallv on a dup of the group, completed by
//         polling MPI_Test under the deadline (mpi_all_to_all.cpp);
//   cuda: ncclSend/ncclRecv to and from every rank inside one ncclGroupStart/End on a stream of
//         its own, ordered after the compute stream's work queued so far, completed by polling its
//         event; a communicator of the group's processes, bootstrapped over it
//         (nccl_all_to_all.cpp).
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "stagecraft/exec/device.h"
#include "stagecraft/exec/element_type.h"
#include "stagecraft/exec/mpi_group.h"
#include "stagecraft/exec/transport.h"

namespace stagecraft::exec {

// Where each rank's block lies in a buffer, in elements: block j is counts[j] elements from
// offsets[j]; one entry per rank of the group.
struct AllToAllBlocks {
  std::vector<int64_t> counts;
  std::vector<int64_t> offsets;
};

// `ranks` blocks of `block_count` elements each, back to back.
AllToAllBlocks EqualBlocks(int ranks, int64_t block_count);

class AllToAllGroup {
 public:
  using Request = int;  // valid until Test returns true or Wait returns

  virtual ~AllToAllGroup() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  virtual std::string Name() const = 0;

  // Block j of `send` (`block_count` elements of `type`) goes to rank j, where it lands at block
  // rank() of its `recv`; both buffers hold size() blocks (device memory of the paired Device)
  // and stay untouched until completion. Every rank posts the same exchanges in the same order.
  virtual Request PostAllToAll(const void* send, void* recv, int64_t block_count, ElementType type) = 0;
  // Blocks of any size: send block j (`send_blocks`) goes to rank j, landing at recv block
  // rank() there, whose count must equal it (rank j's `recv_blocks.counts[rank()]`).
  virtual Request PostAllToAllv(const void* send, const AllToAllBlocks& send_blocks, void* recv,
                                const AllToAllBlocks& recv_blocks, ElementType type) = 0;
  virtual bool Test(Request request) = 0;  // true once complete; the handle is then released
  // Throws TimeoutError naming the exchange when it is not complete within the deadline.
  virtual void Wait(Request request) = 0;
  // As Transport::CompletedNs: when the last exchange Test saw complete ended where it ran; -1
  // where the caller's own stamp stands.
  virtual int64_t CompletedNs() const { return -1; }
};

// Requires a live MpiSession; collective over `group`. Its buffers must be host memory (the cpu
// device's). Every element type moves (an all-to-all adds nothing).
std::unique_ptr<AllToAllGroup> MakeMpiAllToAll(const MpiGroup& group, std::chrono::nanoseconds deadline);

// The cuda backend's over the processes of `group`: one NCCL communicator, rank 0's id
// broadcast over an MPI transport of the group, made as the replicas' is (nccl_comms.h) and
// waited for under `deadline`; one of the process's NCCL communicators, all aborted together on
// a failure of any. `device` (MakeCudaDevice) must outlive it. Collective over the group.
// Throws std::runtime_error when this build has no NCCL or the communicator cannot be made.
std::unique_ptr<AllToAllGroup> MakeNcclAllToAll(const MpiGroup& group, Device& device,
                                                std::chrono::nanoseconds deadline);

}  // namespace stagecraft::exec
