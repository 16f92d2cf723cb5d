// NcclTransport (nccl_transport.h). Every CUDA and NCCL call is checked; a failure throws with the
// host, file:line, the call and the library's own message (the command adds the rank), after
// aborting every NCCL communicator of the process (nccl_comms.h).
#include "stagecraft/exec/nccl_transport.h"

#include <cuda_runtime.h>
#include <nccl.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "cuda_event_pool.h"
#include "nccl_check.h"
#include "nccl_comms.h"
#include "nccl_element_type.h"
#include "stagecraft/exec/cuda_device.h"
#include "stagecraft/exec/capture_book.h"
#include "stagecraft/exec/cuda_plan.h"
#include "stagecraft/exec/handle_pool.h"
#include "stagecraft/exec/poll.h"
#include "stagecraft/kernels/cuda_check.h"

namespace stagecraft::exec {
namespace {

// The tag of Prepare's own transfers (a run's are edge keys, never negative).
constexpr int64_t kProbeTag = -1;

std::string ChannelName(const NcclChannel& c) {
  return "the NCCL channel " + std::to_string(c.from) + " -> " + std::to_string(c.to);
}

class NcclTransport final : public Transport {
 public:
  // Nothing of NCCL yet: the communicators come with the routes of the runs (Prepare).
  NcclTransport(std::unique_ptr<Transport> host, Device& device, std::chrono::nanoseconds deadline)
      : host_(std::move(host)),
        device_(device),
        compute_(static_cast<cudaStream_t>(CudaComputeStream(device))),
        deadline_ns_(deadline.count()),
        rank_(host_->rank()),
        size_(host_->size()),
        peers_(static_cast<size_t>(size_)) {}

  // Best effort and bounded: transfers in flight get kNcclCloseNs to land, else every
  // communicator is aborted (a peer is gone); then each is finalized, or aborted if it does not
  // quiesce.
  ~NcclTransport() override {
    std::vector<cudaEvent_t> in_flight;
    for (const Transfer& t : transfers_.items()) in_flight.push_back(t.done);
    CommSet& comms = NcclComms();
    if (!EventsLand(in_flight, std::min(deadline_ns_, kNcclCloseNs))) comms.AbortAll();
    std::vector<CommSet::Id> ids;
    for (const Channel& c : channels_) ids.push_back(c.comm);
    comms.Close(ids, std::min(deadline_ns_, kNcclCloseNs));
    for (Channel& c : channels_) {
      if (c.stream != nullptr) (void)cudaStreamDestroy(c.stream);  // returns at once; freed when idle
    }
  }

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  std::string Name() const override { return "nccl"; }
  std::chrono::nanoseconds deadline() const override { return std::chrono::nanoseconds(deadline_ns_); }

  using Transport::Irecv;
  using Transport::Isend;
  // A channel's sender is its rank 0 and its receiver its rank 1 (MakeChannels).
  Request Isend(const void* data, int64_t count, ElementType type, int peer, int64_t tag) override {
    const ncclDataType_t datatype = NcclDataTypeOf(type);
    Channel& c = ChannelTo(peer, /*send=*/true, tag);
    EnqueueAfter(c, [&] {  // after the work that made `data`
      SC_NCCL_ENQUEUE(c.comm, ncclSend(data, static_cast<size_t>(count), datatype, 1, Comm(c), c.stream), deadline_ns_);
    });
    return Track(c, peer, tag, /*recv=*/false);
  }
  Request Irecv(void* data, int64_t count, ElementType type, int peer, int64_t tag) override {
    const ncclDataType_t datatype = NcclDataTypeOf(type);
    Channel& c = ChannelTo(peer, /*send=*/false, tag);
    EnqueueAfter(c, [&] {  // after queued work that may still use the buffer's previous contents
      SC_NCCL_ENQUEUE(c.comm, ncclRecv(data, static_cast<size_t>(count), datatype, 0, Comm(c), c.stream), deadline_ns_);
    });
    return Track(c, peer, tag, /*recv=*/true);
  }

  bool Test(Request request) override {
    Transfer& t = At(request);
    if (book_.Captured(request)) {  // carried out by the graph's launches; timed by its stamp
      if (!book_.Joined(request)) return false;
      completed_ns_ = -1;
      Release(request);
      return true;
    }
    const cudaError_t state = cudaEventQuery(t.done);
    if (state == cudaErrorNotReady) return false;
    if (state != cudaSuccess) Fail(kernels::CudaErrorText(state, "cudaEventQuery(transfer done)", __FILE__, __LINE__));
    // Compute queued from now on reads what the receive wrote (already so when it was ordered).
    if (t.recv && !t.ordered) SC_CUDA_CHECK(cudaStreamWaitEvent(compute_, t.done, 0));
    completed_ns_ = CudaEventNs(device_, t.done);
    Release(request);
    return true;
  }

  // The compute stream waits on the receive's event: the consumer queued next runs once the
  // data are in, and the host goes on. Test or Wait still completes the request.
  bool OrderAfter(Request request) override {
    Transfer& t = At(request);
    if (!t.recv) return false;
    if (book_.Captured(request)) {  // the wait recorded into the capture, unless its end joined it
      if (book_.OrderNow(request)) SC_CUDA_CHECK(cudaStreamWaitEvent(compute_, t.done, 0));
      return true;
    }
    // Not twice: a receive BeginCapture ordered before a capture must not be waited on from
    // inside it (an event recorded outside a capture cannot be waited on in it).
    if (!t.ordered) SC_CUDA_CHECK(cudaStreamWaitEvent(compute_, t.done, 0));
    t.ordered = true;
    return true;
  }

  void Wait(Request request) override {
    const Transfer t = At(request);
    book_.CheckWaitable(request, t.tag);
    PollPolicy policy = kNcclPoll;
    policy.deadline_ns = deadline_ns_;
    if (PollUntil([&] { return CheckAsyncErrors(), Test(request); }, policy)) return;
    NcclComms().AbortAll();
    const std::string which = t.tag == kProbeTag ? "the tensor that connects the channel" : "tag " + std::to_string(t.tag);
    throw TimeoutError(std::string("the NCCL ") + (t.recv ? "receive from" : "send to") + " rank " +
                       std::to_string(t.peer) + " (" + which + ") did not complete within " + SecondsText(deadline_ns_) +
                       ": a peer is hung or gone (" + CommSet::kAbortedNote + ")");
  }

  // The channels of the routes this rank has none of yet, made together; then one tensor of
  // each route's size over its channel, unless one went before; then every rank meets, so that
  // their clocks start together.
  void Prepare(const std::vector<Route>& routes) override {
    MakeChannels(routes);
    Connect(routes);
    host_->Barrier();
  }

  void Barrier() override { host_->Barrier(); }
  bool EveryRank(bool mine) override { return host_->EveryRank(mine); }
  std::vector<std::string> Gather(const std::string& mine, int root) override { return host_->Gather(mine, root); }
  void Broadcast(std::string* text, int root) override { host_->Broadcast(text, root); }
  // The transfer's end on its own stream, read on the compute stamps' origin.
  int64_t CompletedNs() const override { return completed_ns_; }

  // Step graphs: a transfer posted while the compute stream is captured forks its channel's
  // stream from the capture (After), and its kernel, its stamp and its done event are recorded
  // there, in that order, so that the done event is the stream's last node in the capture, which
  // OrderAfter (a receive's consumer) or EndCapture joins back into the compute stream.
  bool CapturesTransfers() const override { return true; }
  // Eager, before the capture opens: the compute stream waits for every transfer still in flight
  // (a receive's wait is then not left to a Test made in the capture, which cannot wait on an
  // event recorded outside it), so a graph's transfers start after them on each channel.
  void BeginCapture() override {
    if (book_.open()) throw std::logic_error("nccl transport: a capture is already open");
    for (Request r = 0; r < static_cast<Request>(transfers_.items().size()); ++r) {
      if (!transfers_.Live(r) || book_.Captured(r) || transfers_[r].ordered) continue;
      SC_CUDA_CHECK(cudaStreamWaitEvent(compute_, transfers_[r].done, 0));
      transfers_[r].ordered = true;
    }
    book_.Begin();
  }
  void EndCapture() override {
    for (const Request r : book_.End()) SC_CUDA_CHECK(cudaStreamWaitEvent(compute_, transfers_[r].done, 0));
  }
  // The capture is dropped: its transfers never run; their channels' streams join the compute
  // stream again (so the capture can end and the streams leave it), and their handles are
  // released. Best effort: the capture is failing.
  void AbandonCapture() noexcept override {
    try {
      for (const Request r : book_.Abandon()) {
        (void)cudaStreamWaitEvent(compute_, transfers_[r].done, 0);
        Release(r);
      }
    } catch (...) {  // a vector's allocation: the run's own error is the one reported
    }
  }
  int CaptureStamp(Request request) const override { return book_.StampOf(request); }
  [[noreturn]] void Abort(int exit_code) override {
    NcclComms().AbortAll();  // the replicas' communicator too: nothing of NCCL waits on a peer
    host_->Abort(exit_code);
    std::_Exit(exit_code);  // the host's Abort does not return; this only satisfies [[noreturn]]
  }

 private:
  struct Channel {
    NcclChannel ends;
    CommSet::Id comm = -1;  // in NcclComms()
    cudaStream_t stream = nullptr;
  };
  struct Peer {
    int send = -1;  // index into channels_, -1: no channel
    int recv = -1;
  };
  struct Transfer {
    cudaEvent_t done = nullptr;  // null once released
    int peer = 0;
    int64_t tag = 0;
    bool recv = false;
    bool ordered = false;  // the compute stream already waits on `done` (OrderAfter)
  };

  // Each new channel's sender makes its ncclUniqueId and sends it to the receiver over the host
  // transport (MPI, as floats holding its bytes; the tag is the route's index, the same on both
  // ends); then every new communicator of this rank is made in one group, without blocking, and
  // waited for under the deadline (a peer that never comes aborts them all).
  void MakeChannels(const std::vector<Route>& routes) {
    static_assert(sizeof(ncclUniqueId) % sizeof(float) == 0);
    constexpr int64_t kIdFloats = sizeof(ncclUniqueId) / sizeof(float);
    std::vector<NcclChannel> fresh;
    std::vector<int64_t> tags;
    for (const NcclChannel& c : NcclChannelsOf(routes, rank_)) {
      if (ChannelIndex(c) >= 0) continue;
      fresh.push_back(c);
      const auto it = std::find_if(routes.begin(), routes.end(),
                                   [&](const Route& r) { return r.from == c.from && r.to == c.to; });
      tags.push_back(static_cast<int64_t>(it - routes.begin()));
    }
    if (fresh.empty()) return;
    std::vector<NcclInit> inits(fresh.size());
    std::vector<std::vector<float>> wire(fresh.size(), std::vector<float>(kIdFloats));
    std::vector<Request> pending;
    for (size_t i = 0; i < fresh.size(); ++i) {
      const bool sends = fresh[i].from == rank_;
      inits[i] = {.ranks = 2, .rank = sends ? 0 : 1, .name = ChannelName(fresh[i])};
      if (sends) {
        SC_NCCL_CHECK(nullptr, ncclGetUniqueId(&inits[i].id));
        std::memcpy(wire[i].data(), &inits[i].id, sizeof(ncclUniqueId));
        pending.push_back(host_->Isend(wire[i].data(), kIdFloats, fresh[i].to, tags[i]));
      } else {
        pending.push_back(host_->Irecv(wire[i].data(), kIdFloats, fresh[i].from, tags[i]));
      }
    }
    for (const Request r : pending) host_->Wait(r);
    for (size_t i = 0; i < fresh.size(); ++i) {
      if (fresh[i].to == rank_) std::memcpy(&inits[i].id, wire[i].data(), sizeof(ncclUniqueId));
    }
    const std::vector<CommSet::Id> ids =
        MakeNcclComms(inits, deadline_ns_, "making the NCCL channels of rank " + std::to_string(rank_));
    // Every communicator is held before any stream is made: the destructor closes them all.
    const size_t first = channels_.size();
    for (size_t i = 0; i < fresh.size(); ++i) {
      Channel& c = channels_.emplace_back();
      c.ends = fresh[i];
      c.comm = ids.at(i);
    }
    for (size_t i = first; i < channels_.size(); ++i) {
      SC_CUDA_CHECK(cudaStreamCreateWithFlags(&channels_[i].stream, cudaStreamNonBlocking));
      const NcclChannel& ends = channels_[i].ends;
      Peer& peer = peers_.at(static_cast<size_t>(ends.from == rank_ ? ends.to : ends.from));
      (ends.from == rank_ ? peer.send : peer.recv) = static_cast<int>(i);
    }
  }

  // NCCL connects a channel at its first transfer, per protocol and number of its own channels,
  // which depend on the size; a connection made inside the run would hold the host there, outside
  // every deadline. One tensor of each route's size, moved here, makes the connections the run
  // will use; the tensors are zeros from the device's pool, one region each, and every wait is
  // under the deadline.
  void Connect(const std::vector<Route>& routes) {
    const std::vector<NcclProbe> probes = NcclProbesOf(routes, rank_, connected_);
    if (probes.empty()) return;
    int64_t total = 0;
    for (const NcclProbe& p : probes) total += p.floats;
    Buffer zeros(device_, total);
    device_.memory().Fill(zeros.data(), 0.0f, total);
    std::vector<Request> requests;
    int64_t offset = 0;
    for (const NcclProbe& p : probes) {
      float* region = zeros.data() + offset;
      offset += p.floats;
      requests.push_back(p.channel.from == rank_ ? Isend(region, p.floats, p.channel.to, kProbeTag)
                                                 : Irecv(region, p.floats, p.channel.from, kProbeTag));
    }
    for (const Request r : requests) Wait(r);
    connected_.insert(connected_.end(), probes.begin(), probes.end());
  }

  int ChannelIndex(const NcclChannel& c) const {
    for (size_t i = 0; i < channels_.size(); ++i) {
      if (channels_[i].ends == c) return static_cast<int>(i);
    }
    return -1;
  }
  Channel& ChannelTo(int peer, bool send, int64_t tag) {
    const int index = peer >= 0 && peer < size_ ? (send ? peers_[peer].send : peers_[peer].recv) : -1;
    if (index < 0) {
      throw std::runtime_error(NcclWhere(__FILE__, __LINE__) + "no NCCL channel " + (send ? "to" : "from") + " rank " +
                               std::to_string(peer) + " (tag " + std::to_string(tag) +
                               "): channels are made for the routes a run prepares (Transport::Prepare)");
    }
    return channels_[static_cast<size_t>(index)];
  }
  ncclComm_t Comm(const Channel& c) const { return static_cast<ncclComm_t>(NcclComms().Get(c.comm)); }

  // Enqueues `call` on the channel's stream after the compute stream's work queued so far. If it
  // fails inside a capture, the stream, forked into the capture, joins it again first.
  template <class Call>
  void EnqueueAfter(Channel& c, Call call) {
    After(c.stream);
    try {
      call();
    } catch (...) {
      if (book_.open()) JoinBack(c.stream);
      throw;
    }
  }
  void JoinBack(cudaStream_t stream) noexcept {
    cudaEvent_t joined = nullptr;
    if (cudaEventCreateWithFlags(&joined, cudaEventDisableTiming) != cudaSuccess) return;
    if (cudaEventRecord(joined, stream) == cudaSuccess) (void)cudaStreamWaitEvent(compute_, joined, 0);
    (void)cudaEventDestroy(joined);
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
    // Recorded into a capture: its end's graph stamp before `done`, which must stay the stream's
    // last node there.
    const int stamp = book_.open() ? CudaStampOn(device_, c.stream) : -1;
    SC_CUDA_CHECK(cudaEventRecord(t.done, c.stream));
    const Request request = transfers_.Add(t);
    book_.Posted(request, stamp);
    return request;
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
    book_.Released(request);
  }

  // NCCL's asynchronous errors (a peer gone, a network failure) surface here, not in a call.
  void CheckAsyncErrors() {
    std::vector<CommSet::Id> ids;
    for (const Channel& c : channels_) ids.push_back(c.comm);
    NcclComms().CheckErrors(ids);
  }
  // Ends every communicator of the process so nothing of them waits on a peer any more, then throws.
  [[noreturn]] void Fail(const std::string& what) {
    NcclComms().AbortAll();
    throw std::runtime_error(what + " (" + CommSet::kAbortedNote + ")");
  }

  std::unique_ptr<Transport> host_;
  Device& device_;
  cudaStream_t compute_;
  const int64_t deadline_ns_;
  const int rank_;
  const int size_;
  std::vector<Channel> channels_;
  std::vector<Peer> peers_;  // by rank
  std::vector<NcclProbe> connected_;  // the channels and sizes a tensor has already moved at
  // Destroyed after the destructor's body has given transfers in flight their time: orderings,
  // and the transfers' completions (timed: CudaEventNs).
  CudaEventPool events_;
  CudaEventPool done_events_{cudaEventDefault};
  HandlePool<Transfer> transfers_;
  int64_t completed_ns_ = -1;  // the last transfer Test saw complete
  CaptureBook book_;  // step graphs: the transfers recorded into captures
};

}  // namespace

bool HaveNccl() { return true; }

std::unique_ptr<Transport> MakeNcclTransport(std::unique_ptr<Transport> host, Device& device,
                                             std::chrono::nanoseconds deadline) {
  return std::make_unique<NcclTransport>(std::move(host), device, deadline);
}

}  // namespace stagecraft::exec
