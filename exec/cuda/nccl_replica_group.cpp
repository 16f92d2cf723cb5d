// The cuda backend's replica group (replica_group.h): ncclAllReduce of a stage's gradients on a
// stream of its own, ordered after the compute stream's work queued so far (which made them);
// the STEP that reads the sum orders the compute stream after the all-reduce's event. Every
// CUDA and NCCL call is checked; an error or the deadline aborts the communicator and throws.
#include <cuda_runtime.h>
#include <nccl.h>

#include <cstring>
#include <string>
#include <vector>

#include "cuda_event_pool.h"
#include "nccl_check.h"
#include "stagecraft/exec/cuda_device.h"
#include "stagecraft/exec/handle_pool.h"
#include "stagecraft/exec/poll.h"
#include "stagecraft/exec/replica_group.h"
#include "stagecraft/kernels/cuda_check.h"

namespace stagecraft::exec {
namespace {

// As the NCCL transport polls: spin while an all-reduce of a few MB is likely to finish, then
// sleep briefly between polls.
constexpr int64_t kSpinNs = 50'000;
constexpr int64_t kSleepNs = 20'000;

class NcclReplicaGroup final : public ReplicaGroup {
 public:
  NcclReplicaGroup(std::unique_ptr<ReplicaGroup> mpi, Device& device, std::chrono::nanoseconds deadline)
      : mpi_(std::move(mpi)), device_(device), compute_(static_cast<cudaStream_t>(CudaComputeStream(device))),
        deadline_ns_(deadline.count()) {
    // Replica 0 makes the id; the others get its bytes over the replicas' host transport.
    ncclUniqueId id{};
    std::string wire;
    if (mpi_->replica() == 0) {
      SC_NCCL_CHECK(nullptr, ncclGetUniqueId(&id));
      wire.assign(reinterpret_cast<const char*>(&id), sizeof(id));
    }
    mpi_->host().Broadcast(&wire, 0);
    if (wire.size() != sizeof(id)) throw std::runtime_error("nccl replica group: a malformed ncclUniqueId");
    std::memcpy(&id, wire.data(), sizeof(id));
    SC_NCCL_CHECK(nullptr, ncclCommInitRank(&comm_, mpi_->size(), id, mpi_->replica()));
    SC_CUDA_CHECK(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
    Connect();
  }
  // Best effort: the run is over (or failing), and a destructor must not throw.
  ~NcclReplicaGroup() override {
    for (Pending& p : pending_.items()) {
      if (p.done != nullptr) (void)cudaEventSynchronize(p.done);
    }
    if (!aborted_) {
      (void)cudaStreamSynchronize(stream_);
      (void)ncclCommFinalize(comm_);
      (void)ncclCommDestroy(comm_);
    }
    (void)cudaStreamDestroy(stream_);
  }
  NcclReplicaGroup(const NcclReplicaGroup&) = delete;
  NcclReplicaGroup& operator=(const NcclReplicaGroup&) = delete;

  int replica() const override { return mpi_->replica(); }
  int size() const override { return mpi_->size(); }
  std::string Name() const override { return "nccl"; }
  Transport& host() override { return mpi_->host(); }
  // The all-reduce's end on its own stream, read on the compute stamps' origin.
  int64_t CompletedNs() const override { return completed_ns_; }

  Request PostSum(float* data, int64_t count) override {
    cudaEvent_t queued = events_.Take();
    SC_CUDA_CHECK(cudaEventRecord(queued, compute_));  // the backwards that made the gradients
    SC_CUDA_CHECK(cudaStreamWaitEvent(stream_, queued, 0));
    events_.Give(queued);  // may be re-recorded once the wait is queued
    SC_NCCL_CHECK(comm_, ncclAllReduce(data, data, static_cast<size_t>(count), ncclFloat, ncclSum, comm_, stream_));
    Pending p{done_events_.Take(), count};
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
    const PollPolicy policy{
        .deadline_ns = deadline_ns_, .spin_ns = kSpinNs, .min_sleep_ns = kSleepNs, .max_sleep_ns = kSleepNs};
    if (PollUntil([&] { return CheckAsyncError(), Test(request); }, policy)) return;
    Abort();
    throw TimeoutError("the NCCL all-reduce of " + std::to_string(count) + " floats over " + std::to_string(size()) +
                       " replicas did not complete within " + std::to_string(deadline_ns_ / 1'000'000'000) +
                       " s: a replica is hung or gone (this rank's replica communicator was aborted)");
  }

 private:
  // NCCL may connect a communicator at its first collective and hold the host there until every
  // replica makes it: inside a run that wait would sit outside Wait's deadline. One all-reduce
  // of a float here, before any replica computes, connects it.
  void Connect() {
    float* probe = nullptr;
    SC_CUDA_CHECK(cudaMalloc(&probe, sizeof(float)));
    try {
      SC_CUDA_CHECK(cudaMemset(probe, 0, sizeof(float)));
      SC_CUDA_CHECK(cudaDeviceSynchronize());  // the memset, on the legacy stream, is done
      SC_NCCL_CHECK(comm_, ncclAllReduce(probe, probe, 1, ncclFloat, ncclSum, comm_, stream_));
      SC_CUDA_CHECK(cudaStreamSynchronize(stream_));
    } catch (...) {
      (void)cudaFree(probe);
      throw;
    }
    SC_CUDA_CHECK(cudaFree(probe));
  }

  struct Pending {
    cudaEvent_t done = nullptr;  // null once released
    int64_t count = 0;
  };

  Pending& At(Request request) {
    if (!pending_.Live(request)) {
      throw std::logic_error("nccl replica group: no pending all-reduce " + std::to_string(request));
    }
    return pending_[request];
  }
  // NCCL's asynchronous errors (a replica gone) surface here, not in a call.
  void CheckAsyncError() {
    ncclResult_t async = ncclSuccess;
    const ncclResult_t polled = ncclCommGetAsyncError(comm_, &async);
    if (polled != ncclSuccess) Fail(NcclErrorText(polled, comm_, "ncclCommGetAsyncError", __FILE__, __LINE__));
    if (async != ncclSuccess && async != ncclInProgress) {
      Fail(NcclErrorText(async, comm_, "an all-reduce (ncclCommGetAsyncError)", __FILE__, __LINE__));
    }
  }
  [[noreturn]] void Fail(const std::string& what) {
    Abort();
    throw std::runtime_error(what + " (this rank's replica communicator was aborted)");
  }
  void Abort() {
    if (aborted_) return;
    aborted_ = true;
    (void)ncclCommAbort(comm_);
  }

  std::unique_ptr<ReplicaGroup> mpi_;  // the host side, and the bootstrap
  Device& device_;
  cudaStream_t compute_;
  const int64_t deadline_ns_;
  ncclComm_t comm_ = nullptr;
  cudaStream_t stream_ = nullptr;
  // Destroyed after the destructor's body has synchronized the stream: orderings, and the sums'
  // completions (timed: CudaEventNs).
  CudaEventPool events_;
  CudaEventPool done_events_{cudaEventDefault};
  HandlePool<Pending> pending_;
  int64_t completed_ns_ = -1;  // the last sum Test saw complete
  bool aborted_ = false;
};

}  // namespace

std::unique_ptr<ReplicaGroup> MakeNcclReplicaGroup(std::unique_ptr<ReplicaGroup> mpi, Device& device,
                                                   std::chrono::nanoseconds deadline) {
  return std::make_unique<NcclReplicaGroup>(std::move(mpi), device, deadline);
}

}  // namespace stagecraft::exec
