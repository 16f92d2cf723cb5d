// NcclTransport (nccl_transport.h). Every CUDA and NCCL call is checked; a failure throws
// with the host, file:line, the call and the library's own message (the command adds the rank).
#include "stagecraft/exec/nccl_transport.h"

#include <cuda_runtime.h>
#include <nccl.h>
#include <time.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <stdexcept>
#include <string>
#include <vector>

#include "cuda_event_pool.h"
#include "stagecraft/exec/cuda_device.h"
#include "stagecraft/exec/cuda_plan.h"
#include "stagecraft/exec/handle_pool.h"
#include "stagecraft/kernels/cuda_check.h"
#include "nccl_check.h"

namespace stagecraft::exec {
namespace {

// Polls between these while a transfer is not done (a GPU transfer of a tensor takes tens of
// microseconds; the host has nothing else to do while the runtime waits).
constexpr int64_t kSpinNs = 50'000;
constexpr int64_t kSleepNs = 20'000;

class NcclTransport final : public Transport {
 public:
  NcclTransport(std::unique_ptr<Transport> host, Device& device, std::chrono::nanoseconds deadline)
      : host_(std::move(host)),
        device_(device),
        compute_(static_cast<cudaStream_t>(CudaComputeStream(device))),
        deadline_ns_(deadline.count()),
        rank_(host_->rank()),
        size_(host_->size()) {
    const std::vector<NcclChannel> plan = NcclChannels(size_);
    // Each channel's sender makes its id and sends it to the receiver over the host transport
    // (MPI), as floats holding the id's bytes.
    static_assert(sizeof(ncclUniqueId) % sizeof(float) == 0);
    constexpr int64_t kIdFloats = sizeof(ncclUniqueId) / sizeof(float);
    std::vector<ncclUniqueId> ids(plan.size());
    std::vector<std::vector<float>> wire(plan.size(), std::vector<float>(kIdFloats));
    std::vector<Request> pending;
    for (size_t c = 0; c < plan.size(); ++c) {
      if (plan[c].from == rank_) {
        SC_NCCL_CHECK(nullptr, ncclGetUniqueId(&ids[c]));
        std::memcpy(wire[c].data(), &ids[c], sizeof(ncclUniqueId));
        pending.push_back(host_->Isend(wire[c].data(), kIdFloats, plan[c].to, static_cast<int64_t>(c)));
      } else if (plan[c].to == rank_) {
        pending.push_back(host_->Irecv(wire[c].data(), kIdFloats, plan[c].from, static_cast<int64_t>(c)));
      }
    }
    for (const Request r : pending) host_->Wait(r);
    for (size_t c = 0; c < plan.size(); ++c) {
      if (plan[c].to == rank_) std::memcpy(&ids[c], wire[c].data(), sizeof(ncclUniqueId));
    }
    peers_.assign(static_cast<size_t>(size_), Peer{});
    for (size_t c = 0; c < plan.size(); ++c) {
      const bool sends = plan[c].from == rank_;
      if (!sends && plan[c].to != rank_) continue;
      Channel channel;
      channel.sends = sends;
      SC_NCCL_CHECK(nullptr, ncclCommInitRank(&channel.comm, 2, ids[c], sends ? 0 : 1));
      SC_CUDA_CHECK(cudaStreamCreateWithFlags(&channel.stream, cudaStreamNonBlocking));
      channels_.push_back(channel);
      Peer& peer = peers_[static_cast<size_t>(sends ? plan[c].to : plan[c].from)];
      (sends ? peer.send : peer.recv) = static_cast<int>(channels_.size()) - 1;
    }
    Connect();
  }

  // Best effort: the run is over (or failing), and a destructor must not throw.
  ~NcclTransport() override {
    for (Transfer& t : transfers_.items()) {
      if (t.done != nullptr) (void)cudaEventSynchronize(t.done);
    }
    for (Channel& c : channels_) {
      if (!aborted_) {
        (void)cudaStreamSynchronize(c.stream);
        (void)ncclCommFinalize(c.comm);
        (void)ncclCommDestroy(c.comm);
      }
      (void)cudaStreamDestroy(c.stream);
    }
  }

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  std::string Name() const override { return "nccl"; }

  Request Isend(const float* data, int64_t count, int peer, int64_t tag) override {
    Channel& c = ChannelTo(peer, /*send=*/true, tag);
    After(c.stream);  // the work that made `data`
    SC_NCCL_CHECK(c.comm, ncclSend(data, static_cast<size_t>(count), ncclFloat32, 1, c.comm, c.stream));
    return Track(c, peer, tag, /*recv=*/false);
  }
  Request Irecv(float* data, int64_t count, int peer, int64_t tag) override {
    Channel& c = ChannelTo(peer, /*send=*/false, tag);
    After(c.stream);  // queued work that may still use the buffer's previous contents
    SC_NCCL_CHECK(c.comm, ncclRecv(data, static_cast<size_t>(count), ncclFloat32, 0, c.comm, c.stream));
    return Track(c, peer, tag, /*recv=*/true);
  }

  bool Test(Request request) override {
    Transfer& t = At(request);
    const cudaError_t state = cudaEventQuery(t.done);
    if (state == cudaErrorNotReady) return false;
    if (state != cudaSuccess) Fail(kernels::CudaErrorText(state, "cudaEventQuery(transfer done)", __FILE__, __LINE__));
    // Compute queued from now on reads what the receive wrote.
    if (t.recv) SC_CUDA_CHECK(cudaStreamWaitEvent(compute_, t.done, 0));
    completed_ns_ = CudaEventNs(device_, t.done);
    Release(request);
    return true;
  }

  void Wait(Request request) override {
    const auto start = std::chrono::steady_clock::now();
    const Transfer t = At(request);
    while (!Test(request)) {
      CheckAsyncErrors();
      const int64_t waited = std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - start).count();
      if (waited > deadline_ns_) {
        AbortCommunicators();
        throw TimeoutError(std::string("the NCCL ") + (t.recv ? "receive from" : "send to") + " rank " +
                           std::to_string(t.peer) + " (tag " + std::to_string(t.tag) + ") did not complete within " +
                           std::to_string(deadline_ns_ / 1'000'000'000) + " s: a peer is hung or gone (this rank's "
                           "NCCL communicators were aborted)");
      }
      if (waited > kSpinNs) {
        const timespec ts{0, static_cast<long>(kSleepNs)};
        nanosleep(&ts, nullptr);
      }
    }
  }

  void Barrier() override { host_->Barrier(); }
  bool EveryRank(bool mine) override { return host_->EveryRank(mine); }
  std::vector<std::string> Gather(const std::string& mine, int root) override { return host_->Gather(mine, root); }
  void Broadcast(std::string* text, int root) override { host_->Broadcast(text, root); }
  // The transfer's end on its own stream, read on the compute stamps' origin.
  int64_t CompletedNs() const override { return completed_ns_; }
  [[noreturn]] void Abort(int exit_code) override {
    AbortCommunicators();
    host_->Abort(exit_code);
    std::_Exit(exit_code);  // the host's Abort does not return; this only satisfies [[noreturn]]
  }

 private:
  struct Channel {
    ncclComm_t comm = nullptr;
    cudaStream_t stream = nullptr;
    bool sends = false;  // this rank is the channel's sender (NCCL rank 0 of the two)
  };

  // NCCL connects a communicator's two ranks at its first send or receive, and may hold the
  // host there until the peer makes its own first call: inside a run that wait would sit
  // outside Wait's deadline, and could meet a peer that waits on this rank's next op. One float
  // over every channel, in the plan's order on every rank (as the communicators were made),
  // connects them all here, before any rank computes.
  void Connect() {
    if (channels_.empty()) return;
    const size_t bytes = channels_.size() * sizeof(float);  // a float of its own per channel
    float* probe = nullptr;
    SC_CUDA_CHECK(cudaMalloc(&probe, bytes));
    try {
      SC_CUDA_CHECK(cudaMemset(probe, 0, bytes));
      SC_CUDA_CHECK(cudaDeviceSynchronize());  // the memset, on the legacy stream, is done
      for (size_t i = 0; i < channels_.size(); ++i) {
        Channel& c = channels_[i];
        SC_NCCL_CHECK(c.comm, c.sends ? ncclSend(probe + i, 1, ncclFloat32, 1, c.comm, c.stream)
                                      : ncclRecv(probe + i, 1, ncclFloat32, 0, c.comm, c.stream));
      }
      for (Channel& c : channels_) SC_CUDA_CHECK(cudaStreamSynchronize(c.stream));
    } catch (...) {
      (void)cudaFree(probe);
      throw;
    }
    SC_CUDA_CHECK(cudaFree(probe));
  }

  struct Peer {
    int send = -1;  // index into channels_, -1: no channel
    int recv = -1;
  };
  struct Transfer {
    cudaEvent_t done = nullptr;  // null once released
    int peer = 0;
    int64_t tag = 0;
    bool recv = false;
  };

  Channel& ChannelTo(int peer, bool send, int64_t tag) {
    const int index = peer >= 0 && peer < size_ ? (send ? peers_[peer].send : peers_[peer].recv) : -1;
    if (index < 0) {
      throw std::runtime_error(NcclWhere(__FILE__, __LINE__) + "no NCCL channel " + (send ? "to" : "from") + " rank " +
                               std::to_string(peer) + " (tag " + std::to_string(tag) +
                               "): only neighbouring ranks exchange tensors");
    }
    return channels_[static_cast<size_t>(index)];
  }

  // `stream` waits for the compute stream's work queued so far.
  void After(cudaStream_t stream) {
    cudaEvent_t queued = events_.Take();
    SC_CUDA_CHECK(cudaEventRecord(queued, compute_));
    SC_CUDA_CHECK(cudaStreamWaitEvent(stream, queued, 0));
    events_.Give(queued);  // a recorded event may be re-recorded once the wait is queued
  }

  Request Track(Channel& c, int peer, int64_t tag, bool recv) {
    Transfer t{done_events_.Take(), peer, tag, recv};
    SC_CUDA_CHECK(cudaEventRecord(t.done, c.stream));
    return transfers_.Add(t);
  }
  Transfer& At(Request request) {
    if (!transfers_.Live(request)) {
      throw std::logic_error("nccl transport: no pending request " + std::to_string(request));
    }
    return transfers_[request];
  }
  void Release(Request request) {
    done_events_.Give(transfers_[request].done);
    transfers_.Release(request);
  }

  // NCCL's asynchronous errors (a peer gone, a network failure) surface here, not in a call.
  void CheckAsyncErrors() {
    for (Channel& c : channels_) {
      ncclResult_t async = ncclSuccess;
      const ncclResult_t polled = ncclCommGetAsyncError(c.comm, &async);
      if (polled != ncclSuccess) Fail(NcclErrorText(polled, c.comm, "ncclCommGetAsyncError", __FILE__, __LINE__));
      if (async != ncclSuccess && async != ncclInProgress) {
        Fail(NcclErrorText(async, c.comm, "a transfer (ncclCommGetAsyncError)", __FILE__, __LINE__));
      }
    }
  }
  // Ends this rank's communicators so nothing of them waits on a peer any more, then throws.
  [[noreturn]] void Fail(const std::string& what) {
    AbortCommunicators();
    throw std::runtime_error(what + " (this rank's NCCL communicators were aborted)");
  }
  void AbortCommunicators() {
    if (aborted_) return;
    aborted_ = true;
    for (Channel& c : channels_) (void)ncclCommAbort(c.comm);
  }

  std::unique_ptr<Transport> host_;
  Device& device_;
  cudaStream_t compute_;
  const int64_t deadline_ns_;
  const int rank_;
  const int size_;
  std::vector<Channel> channels_;
  std::vector<Peer> peers_;  // by rank
  // Destroyed after the destructor's body has synchronized the streams: orderings, and the
  // transfers' completions (timed: CudaEventNs).
  CudaEventPool events_;
  CudaEventPool done_events_{cudaEventDefault};
  HandlePool<Transfer> transfers_;
  int64_t completed_ns_ = -1;  // the last transfer Test saw complete
  bool aborted_ = false;
};

}  // namespace

bool HaveNccl() { return true; }

std::unique_ptr<Transport> MakeNcclTransport(std::unique_ptr<Transport> host, Device& device,
                                             std::chrono::nanoseconds deadline) {
  return std::make_unique<NcclTransport>(std::move(host), device, deadline);
}

}  // namespace stagecraft::exec
