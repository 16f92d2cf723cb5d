// The cuda backend's all-to-all group (all_to_all.h): for each exchange, a ncclSend and a
// ncclRecv with every rank of the group (itself included) inside one ncclGroupStart/End, on a
// stream of its own ordered after the compute stream's work queued so far (which made the send
// blocks and may still read the receive buffer); the work queued after its completion is ordered
// after its event (nccl_collectives.h). One non-blocking communicator of the group's processes,
// with few CTAs (nccl_comms.h), bootstrapped over an MPI transport of the group; an error or the
// deadline anywhere aborts every NCCL communicator of the process. Every CUDA and NCCL call is
// checked.
#include <cuda_runtime.h>
#include <nccl.h>

#include <memory>
#include <stdexcept>
#include <string>

#include "nccl_check.h"
#include "nccl_collectives.h"
#include "nccl_comms.h"
#include "nccl_element_type.h"
#include "stagecraft/exec/all_to_all.h"
#include "stagecraft/exec/mpi_transport.h"

namespace stagecraft::exec {
namespace {

// Throws std::invalid_argument unless `blocks` has one block per rank, none negative.
void CheckBlocks(const AllToAllBlocks& blocks, int ranks, const char* which) {
  const auto n = static_cast<size_t>(ranks);
  if (blocks.counts.size() != n || blocks.offsets.size() != n) {
    throw std::invalid_argument("nccl all-to-all: " + std::string(which) + " name " +
                                std::to_string(blocks.counts.size()) + " counts and " +
                                std::to_string(blocks.offsets.size()) + " offsets for " + std::to_string(ranks) +
                                " ranks");
  }
  for (size_t j = 0; j < n; ++j) {
    if (blocks.counts[j] < 0 || blocks.offsets[j] < 0) {
      throw std::invalid_argument("nccl all-to-all: " + std::string(which) + " of rank " + std::to_string(j) +
                                  " has a negative count or offset");
    }
  }
}

class NcclAllToAll final : public AllToAllGroup {
 public:
  // Rank 0 makes the id and the others get its bytes over the group's host transport; the
  // communicator is made without blocking and waited for under the deadline.
  NcclAllToAll(const MpiGroup& group, Device& device, std::chrono::nanoseconds deadline)
      : host_(MakeMpiTransport(group.Dup(), deadline)),
        nccl_(*host_, host_->size(), host_->rank(), device, deadline, "an all-to-all's NCCL communicator",
              {"all-to-all", "ranks", "peer"}) {}
  NcclAllToAll(const NcclAllToAll&) = delete;
  NcclAllToAll& operator=(const NcclAllToAll&) = delete;

  int rank() const override { return host_->rank(); }
  int size() const override { return host_->size(); }
  std::string Name() const override { return "nccl"; }
  int64_t CompletedNs() const override { return nccl_.completed_ns(); }

  Request PostAllToAll(const void* send, void* recv, int64_t block_count, ElementType type) override {
    const AllToAllBlocks blocks = EqualBlocks(size(), block_count);
    return PostAllToAllv(send, blocks, recv, blocks, type);
  }

  Request PostAllToAllv(const void* send, const AllToAllBlocks& send_blocks, void* recv,
                        const AllToAllBlocks& recv_blocks, ElementType type) override {
    const ncclDataType_t datatype = NcclDataTypeOf(type);
    CheckBlocks(send_blocks, size(), "the send blocks");
    CheckBlocks(recv_blocks, size(), "the receive blocks");
    nccl_.After();  // the work that made the send blocks and may still read the receive buffer
    const auto comm = nccl_.comm();
    const cudaStream_t stream = nccl_.stream();
    const int64_t bytes = ElementBytes(type);
    const auto* from = static_cast<const char*>(send);
    auto* to = static_cast<char*>(recv);
    int64_t elements = 0;
    std::string error;  // the first call that failed inside the group; the group still ends
    const auto note = [&](ncclResult_t r, const char* call) {
      if (r != ncclSuccess && r != ncclInProgress && error.empty()) error = NcclErrorText(r, comm, call, __FILE__, __LINE__);
    };
    const ncclResult_t start = ncclGroupStart();
    if (start != ncclSuccess) NcclCollectives::Fail(NcclErrorText(start, comm, "ncclGroupStart", __FILE__, __LINE__));
    for (int j = 0; j < size(); ++j) {
      const auto peer = static_cast<size_t>(j);
      if (send_blocks.counts[peer] > 0) {
        note(ncclSend(from + send_blocks.offsets[peer] * bytes, static_cast<size_t>(send_blocks.counts[peer]), datatype,
                      j, comm, stream),
             "ncclSend");
        elements += send_blocks.counts[peer];
      }
      if (recv_blocks.counts[peer] > 0) {
        note(ncclRecv(to + recv_blocks.offsets[peer] * bytes, static_cast<size_t>(recv_blocks.counts[peer]), datatype,
                      j, comm, stream),
             "ncclRecv");
      }
    }
    const ncclResult_t end = ncclGroupEnd();
    if (!error.empty()) NcclCollectives::Fail(error);
    // ncclInProgress (the communicator connects the peers at its first exchange): waited out
    // under the deadline; an error aborts every communicator and throws.
    CheckEnqueued(nccl_.id(), end, "ncclGroupEnd (an all-to-all's sends and receives)", nccl_.deadline_ns(), __FILE__,
                  __LINE__);
    return nccl_.Enqueued(elements, type);
  }

  bool Test(Request request) override { return nccl_.Test(request); }
  void Wait(Request request) override { nccl_.Wait(request, size()); }

 private:
  std::unique_ptr<Transport> host_;  // the bootstrap, over a dup of the group
  NcclCollectives nccl_;
};

}  // namespace

std::unique_ptr<AllToAllGroup> MakeNcclAllToAll(const MpiGroup& group, Device& device,
                                                std::chrono::nanoseconds deadline) {
  return std::make_unique<NcclAllToAll>(group, device, deadline);
}

}  // namespace stagecraft::exec
