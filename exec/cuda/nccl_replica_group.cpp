// The cuda backend's replica group (replica_group.h): ncclAllReduce of a stage's gradients on a
// stream of its own, ordered after the compute stream's work queued so far (which made them);
// the STEP that reads the sum orders the compute stream after the all-reduce's event. The
// communicator is non-blocking, with few CTAs (nccl_comms.h), and one of the process's NCCL
// communicators: an error or the deadline anywhere aborts them all. Every CUDA and NCCL call is
// checked.
#include <cuda_runtime.h>
#include <nccl.h>

#include <algorithm>
#include <cstring>
#include <set>
#include <string>
#include <vector>

#include "cuda_event_pool.h"
#include "nccl_check.h"
#include "nccl_comms.h"
#include "nccl_element_type.h"
#include "stagecraft/exec/cuda_device.h"
#include "stagecraft/exec/handle_pool.h"
#include "stagecraft/exec/poll.h"
#include "stagecraft/exec/replica_group.h"
#include "stagecraft/kernels/cuda_check.h"

namespace stagecraft::exec {
namespace {


class NcclReplicaGroup final : public ReplicaGroup {
 public:
  // Replica 0 makes the id and the others get its bytes over the replicas' host transport; the
  // communicator is made without blocking and waited for under the deadline.
  NcclReplicaGroup(std::unique_ptr<ReplicaGroup> mpi, Device& device, std::chrono::nanoseconds deadline)
      : mpi_(std::move(mpi)), device_(device), compute_(static_cast<cudaStream_t>(CudaComputeStream(device))),
        deadline_ns_(deadline.count()) {
    const NcclGroupComm made =
        MakeNcclGroupComm(mpi_->host(), mpi_->size(), mpi_->replica(), deadline_ns_, "the replicas' NCCL communicator");
    comm_ = made.comm, stream_ = made.stream;
  }
  // Best effort and bounded, as the NCCL transport's (nccl_transport.cpp).
  ~NcclReplicaGroup() override {
    std::vector<cudaEvent_t> in_flight;
    for (const Pending& p : pending_.items()) in_flight.push_back(p.done);
    CloseNcclGroupComm({comm_, stream_}, in_flight, deadline_ns_);
  }
  NcclReplicaGroup(const NcclReplicaGroup&) = delete;
  NcclReplicaGroup& operator=(const NcclReplicaGroup&) = delete;

  int replica() const override { return mpi_->replica(); }
  int size() const override { return mpi_->size(); }
  std::string Name() const override { return "nccl"; }
  Transport& host() override { return mpi_->host(); }
  // The all-reduce's end on its own stream, read on the compute stamps' origin.
  int64_t CompletedNs() const override { return completed_ns_; }

  using ReplicaGroup::PostSum;
  Request PostSum(void* data, int64_t count, ElementType type) override {
    const ncclDataType_t datatype = NcclDataTypeOf(type);
    if (count < 0) throw std::invalid_argument("nccl replica group: a sum of " + std::to_string(count) + " elements");
    cudaEvent_t queued = events_.Take();
    SC_CUDA_CHECK(cudaEventRecord(queued, compute_));  // the backwards that made the gradients
    SC_CUDA_CHECK(cudaStreamWaitEvent(stream_, queued, 0));
    events_.Give(queued);  // may be re-recorded once the wait is queued
    const auto comm = static_cast<ncclComm_t>(NcclComms().Get(comm_));
    SC_NCCL_ENQUEUE(comm_, ncclAllReduce(data, data, static_cast<size_t>(count), datatype, ncclSum, comm, stream_),
                    deadline_ns_);
    Pending p{done_events_.Take(), count, type};
    SC_CUDA_CHECK(cudaEventRecord(p.done, stream_));
    return pending_.Add(p);
  }

  bool Test(Request request) override {
    Pending& p = At(request);
    const cudaError_t state = cudaEventQuery(p.done);
    if (state == cudaErrorNotReady) return false;
    if (state != cudaSuccess) {
      Fail(kernels::CudaErrorText(state, "cudaEventQuery(all-reduce done)", __FILE__, __LINE__));
    }
    SC_CUDA_CHECK(cudaStreamWaitEvent(compute_, p.done, 0));  // the STEP reads the sum
    completed_ns_ = CudaEventNs(device_, p.done);
    done_events_.Give(p.done);
    pending_.Release(request);
    return true;
  }

  void Wait(Request request) override {
    const int64_t count = At(request).count;
    const ElementType type = At(request).type;
    PollPolicy policy = kNcclPoll;
    policy.deadline_ns = deadline_ns_;
    if (PollUntil([&] { return NcclComms().CheckErrors({comm_}), Test(request); }, policy)) return;
    NcclComms().AbortAll();
    throw TimeoutError("the NCCL all-reduce of " + ElementCountText(count, type) + " over " + std::to_string(size()) +
                       " replicas did not complete within " + SecondsText(deadline_ns_) +
                       ": a replica is hung or gone (" + CommSet::kAbortedNote + ")");
  }

  // NCCL connects the algorithm it picks for a size at its first all-reduce of that size
  // (NCCL_RUNTIME_CONNECT, the default since 2.22), and would hold the host there inside the run.
  // One all-reduce of zeros at each size not summed yet, in the same order on every replica,
  // makes those connections now, each waited for under the deadline.
  void Prepare(const std::vector<int64_t>& sum_floats) override {
    for (const int64_t floats : sum_floats) {
      if (floats <= 0 || !connected_.insert(floats).second) continue;
      Buffer zeros(device_, floats);
      device_.memory().Fill(zeros.data(), 0.0f, floats);
      Wait(PostSum(zeros.data(), floats));
    }
  }

 private:
  struct Pending {
    cudaEvent_t done = nullptr;  // null once released
    int64_t count = 0;
    ElementType type = ElementType::kF32;
  };

  Pending& At(Request request) {
    if (!pending_.Live(request)) {
      throw std::logic_error("nccl replica group: no pending all-reduce " + std::to_string(request));
    }
    return pending_[request];
  }
  [[noreturn]] void Fail(const std::string& what) {
    NcclComms().AbortAll();
    throw std::runtime_error(what + " (" + CommSet::kAbortedNote + ")");
  }

  std::unique_ptr<ReplicaGroup> mpi_;  // the host side, and the bootstrap
  Device& device_;
  cudaStream_t compute_;
  const int64_t deadline_ns_;
  CommSet::Id comm_ = -1;  // in NcclComms()
  cudaStream_t stream_ = nullptr;
  std::set<int64_t> connected_;  // the sizes (floats) summed already
  // Destroyed after the destructor's body has given sums in flight their time: orderings, and
  // the sums' completions (timed: CudaEventNs).
  CudaEventPool events_;
  CudaEventPool done_events_{cudaEventDefault};
  HandlePool<Pending> pending_;
  int64_t completed_ns_ = -1;  // the last sum Test saw complete
};

}  // namespace

std::unique_ptr<ReplicaGroup> MakeNcclReplicaGroup(std::unique_ptr<ReplicaGroup> mpi, Device& device,
                                                   std::chrono::nanoseconds deadline) {
  return std::make_unique<NcclReplicaGroup>(std::move(mpi), device, deadline);
}

}  // namespace stagecraft::exec
