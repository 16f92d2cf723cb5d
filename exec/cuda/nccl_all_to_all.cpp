// The cuda backend's all-to-all group (all_to_all.h): for each exchange, a ncclSend and a
// ncclRecv with every rank of the group (itself included) inside one ncclGroupStart/End, on a
// stream of its own ordered after the compute stream's work queued so far (which made the send
// blocks and may still read the receive buffer); the work queued after its completion is ordered
// after its event. One non-blocking communicator of the group's processes, with few CTAs
// (nccl_comms.h), bootstrapped over an MPI transport of the group; an error or the deadline
// anywhere aborts every NCCL communicator of the process. Every CUDA and NCCL call is checked.
#include <cuda_runtime.h>
#include <nccl.h>

#include <algorithm>
#include <cstring>
#include <stdexcept>
#include <string>
#include <vector>

#include "cuda_event_pool.h"
#include "nccl_check.h"
#include "nccl_comms.h"
#include "nccl_element_type.h"
#include "stagecraft/exec/all_to_all.h"
#include "stagecraft/exec/cuda_device.h"
#include "stagecraft/exec/handle_pool.h"
#include "stagecraft/exec/mpi_transport.h"
#include "stagecraft/exec/poll.h"
#include "stagecraft/kernels/cuda_check.h"

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
        device_(device),
        compute_(static_cast<cudaStream_t>(CudaComputeStream(device))),
        deadline_ns_(deadline.count()) {
    const NcclGroupComm made =
        MakeNcclGroupComm(*host_, host_->size(), host_->rank(), deadline_ns_, "an all-to-all's NCCL communicator");
    comm_ = made.comm, stream_ = made.stream;
  }
  // Best effort and bounded, as the replica group's (nccl_replica_group.cpp).
  ~NcclAllToAll() override {
    std::vector<cudaEvent_t> in_flight;
    for (const Pending& p : pending_.items()) in_flight.push_back(p.done);
    CloseNcclGroupComm({comm_, stream_}, in_flight, deadline_ns_);
  }
  NcclAllToAll(const NcclAllToAll&) = delete;
  NcclAllToAll& operator=(const NcclAllToAll&) = delete;

  int rank() const override { return host_->rank(); }
  int size() const override { return host_->size(); }
  std::string Name() const override { return "nccl"; }
  int64_t CompletedNs() const override { return completed_ns_; }

  Request PostAllToAll(const void* send, void* recv, int64_t block_count, ElementType type) override {
    const AllToAllBlocks blocks = EqualBlocks(size(), block_count);
    return PostAllToAllv(send, blocks, recv, blocks, type);
  }

  Request PostAllToAllv(const void* send, const AllToAllBlocks& send_blocks, void* recv,
                        const AllToAllBlocks& recv_blocks, ElementType type) override {
    const ncclDataType_t datatype = NcclDataTypeOf(type);
    CheckBlocks(send_blocks, size(), "the send blocks");
    CheckBlocks(recv_blocks, size(), "the receive blocks");
    After();
    const auto comm = static_cast<ncclComm_t>(NcclComms().Get(comm_));
    const int64_t bytes = ElementBytes(type);
    const auto* from = static_cast<const char*>(send);
    auto* to = static_cast<char*>(recv);
    int64_t elements = 0;
    std::string error;  // the first call that failed inside the group; the group still ends
    const auto note = [&](ncclResult_t r, const char* call) {
      if (r != ncclSuccess && r != ncclInProgress && error.empty()) error = NcclErrorText(r, comm, call, __FILE__, __LINE__);
    };
    const ncclResult_t start = ncclGroupStart();
    if (start != ncclSuccess) Fail(NcclErrorText(start, comm, "ncclGroupStart", __FILE__, __LINE__));
    for (int j = 0; j < size(); ++j) {
      const auto peer = static_cast<size_t>(j);
      if (send_blocks.counts[peer] > 0) {
        note(ncclSend(from + send_blocks.offsets[peer] * bytes, static_cast<size_t>(send_blocks.counts[peer]), datatype,
                      j, comm, stream_),
             "ncclSend");
        elements += send_blocks.counts[peer];
      }
      if (recv_blocks.counts[peer] > 0) {
        note(ncclRecv(to + recv_blocks.offsets[peer] * bytes, static_cast<size_t>(recv_blocks.counts[peer]), datatype,
                      j, comm, stream_),
             "ncclRecv");
      }
    }
    const ncclResult_t end = ncclGroupEnd();
    if (!error.empty()) Fail(error);
    // ncclInProgress (the communicator connects the peers at its first exchange): waited out
    // under the deadline; an error aborts every communicator and throws.
    CheckEnqueued(comm_, end, "ncclGroupEnd (an all-to-all's sends and receives)", deadline_ns_, __FILE__, __LINE__);
    Pending p{done_events_.Take(), elements, type};
    SC_CUDA_CHECK(cudaEventRecord(p.done, stream_));
    return pending_.Add(p);
  }

  bool Test(Request request) override {
    Pending& p = At(request);
    const cudaError_t state = cudaEventQuery(p.done);
    if (state == cudaErrorNotReady) return false;
    if (state != cudaSuccess) Fail(kernels::CudaErrorText(state, "cudaEventQuery(all-to-all done)", __FILE__, __LINE__));
    SC_CUDA_CHECK(cudaStreamWaitEvent(compute_, p.done, 0));  // the work queued next reads the blocks
    completed_ns_ = CudaEventNs(device_, p.done);
    done_events_.Give(p.done);
    pending_.Release(request);
    return true;
  }

  void Wait(Request request) override {
    const Pending p = At(request);
    PollPolicy policy = kNcclPoll;
    policy.deadline_ns = deadline_ns_;
    if (PollUntil([&] { return NcclComms().CheckErrors({comm_}), Test(request); }, policy)) return;
    NcclComms().AbortAll();
    throw TimeoutError("the NCCL all-to-all of " + ElementCountText(p.elements, p.type) + " over " + std::to_string(size()) +
                       " ranks did not complete within " + SecondsText(deadline_ns_) + ": a peer is hung or gone (" +
                       CommSet::kAbortedNote + ")");
  }

 private:
  struct Pending {
    cudaEvent_t done = nullptr;  // null once released
    int64_t elements = 0;        // sent by this rank, for a deadline's message
    ElementType type = ElementType::kF32;
  };

  // The exchange's stream waits for the compute stream's work queued so far.
  void After() {
    cudaEvent_t queued = events_.Take();
    SC_CUDA_CHECK(cudaEventRecord(queued, compute_));
    SC_CUDA_CHECK(cudaStreamWaitEvent(stream_, queued, 0));
    events_.Give(queued);  // may be re-recorded once the wait is queued
  }
  Pending& At(Request request) {
    if (!pending_.Live(request)) throw std::logic_error("nccl all-to-all: no pending exchange " + std::to_string(request));
    return pending_[request];
  }
  [[noreturn]] void Fail(const std::string& what) {
    NcclComms().AbortAll();
    throw std::runtime_error(what + " (" + CommSet::kAbortedNote + ")");
  }

  std::unique_ptr<Transport> host_;  // the bootstrap, over a dup of the group
  Device& device_;
  cudaStream_t compute_;
  const int64_t deadline_ns_;
  CommSet::Id comm_ = -1;  // in NcclComms()
  cudaStream_t stream_ = nullptr;
  // Destroyed after the destructor's body has given exchanges in flight their time.
  CudaEventPool events_;
  CudaEventPool done_events_{cudaEventDefault};
  HandlePool<Pending> pending_;
  int64_t completed_ns_ = -1;  // the last exchange Test saw complete
};

}  // namespace

std::unique_ptr<AllToAllGroup> MakeNcclAllToAll(const MpiGroup& group, Device& device,
                                                std::chrono::nanoseconds deadline) {
  return std::make_unique<NcclAllToAll>(group, device, deadline);
}

}  // namespace stagecraft::exec
