// Transport: the pipeline's point-to-point group: moves activations and gradients between
// pipeline ranks and runs the few host-side collectives the executor needs (DESIGN.md §5). It is
// made over a group split from the process's world (mpi_group.h). The cpu backend implements it
// with MPI; a cuda backend with NCCL bootstrapped over MPI. Sends and receives are non-blocking and posted
// exactly where the IR puts SEND/RECV ops; Wait holds the core only when every rank of the
// node has its own, so ranks that outnumber cores do not starve each other.
#pragma once

#include <chrono>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

#include "stagecraft/exec/element_type.h"

namespace stagecraft::exec {

// How long a Wait lets one transfer (or a barrier) take before it calls the peer hung and throws
// (`execute --timeout`).
inline constexpr std::chrono::seconds kDefaultWaitDeadline{300};

// A wait that ran past the transport's deadline. what(): the transfer, the peer and the deadline;
// the runtime prefixes the op it was waiting for.
class TimeoutError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Runs `wait`, a blocking transport call, and returns what it returns; a TimeoutError from it is
// thrown again as "<what()> timed out: <its message>", `what` (a callable) naming the wait, so
// the one line a timed-out rank prints says what it was waiting for.
template <class Wait, class What>
decltype(auto) NamingTimeout(Wait&& wait, What&& what) {
  try {
    return wait();
  } catch (const TimeoutError& e) {
    throw TimeoutError(std::string(what()) + " timed out: " + e.what());
  }
}

// One direction of a run's traffic: tensors of `floats` floats from rank `from` to rank `to`.
struct Route {
  int from = 0;
  int to = 0;
  int64_t floats = 0;
  bool operator==(const Route&) const = default;
};

class Transport {
 public:
  using Request = int;  // a handle, valid until Test returns true or Wait returns

  virtual ~Transport() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  virtual std::string Name() const = 0;

  // `count` elements of `type` at `data`, device memory of the paired Device, which stays
  // untouched until completion; a receive names the type and count its send does. A transport
  // overrides this typed pair. (A test double that moves fp32 alone may override the fp32 pair
  // below instead: then these forward fp32 to it and refuse any other type.)
  virtual Request Isend(const void* data, int64_t count, ElementType type, int peer, int64_t tag);
  virtual Request Irecv(void* data, int64_t count, ElementType type, int peer, int64_t tag);
  // fp32, the activations and gradients of every run: the typed pair with ElementType::kF32.
  virtual Request Isend(const float* data, int64_t count, int peer, int64_t tag) {
    return Isend(static_cast<const void*>(data), count, ElementType::kF32, peer, tag);
  }
  virtual Request Irecv(float* data, int64_t count, int peer, int64_t tag) {
    return Irecv(static_cast<void*>(data), count, ElementType::kF32, peer, tag);
  }
  virtual bool Test(Request request) = 0;  // true once complete; the handle is then released
  // Throws TimeoutError naming the transfer and the peer when it is not complete within the
  // transport's deadline (kDefaultWaitDeadline unless the transport was made with another);
  // Barrier and Gather wait under the same deadline.
  virtual void Wait(Request request) = 0;
  // Right after Test returned true or Wait returned: when that transfer completed where it ran,
  // on the host's steady clock (DeviceClock::NowNs), for a transport that times its transfers on the
  // device (nccl: an event on the transfer's stream); -1 for one that completes them on the
  // host (mpi), whose caller stamps its own clock as it sees the completion.
  virtual int64_t CompletedNs() const { return -1; }

  virtual void Barrier() = 0;
  // True on every rank when `mine` is true on every rank (a logical-and over the ranks); waits
  // under the same deadline as Barrier.
  virtual bool EveryRank(bool mine) = 0;
  // Every rank's `mine`, in rank order, on `root` (empty elsewhere).
  virtual std::vector<std::string> Gather(const std::string& mine, int root) = 0;
  // `*text` of `root` on every rank.
  virtual void Broadcast(std::string* text, int root) = 0;

  // Ends every rank of the job with a non-zero exit; the caller has printed the cause.
  [[noreturn]] virtual void Abort(int exit_code) = 0;

  // Before a run's clock starts; collective over every rank of the transport, each passing the
  // same routes (the run's traffic: Routes in mailbox.h). Makes ready what those transfers need,
  // so that none of the run's waits for a connection: nccl makes the communicators of the routes
  // that have none yet (all at once, without blocking) and moves one tensor of each route's size
  // over it, every wait under the deadline, then meets the other ranks so that their clocks start
  // together. Nothing for a transport that has nothing to connect (mpi, host-staged).
  virtual void Prepare(const std::vector<Route>& /*routes*/) {}
  // Orders the device's work queued from now on after receive `request` without the host
  // waiting for it, and returns true: the request stays pending, and Test or Wait completes it
  // as before (its CompletedNs then says when it landed). False, doing nothing, for a transport
  // whose received data are in place only once the host has seen the receive complete (mpi,
  // host-staged): the caller Waits. nccl: the compute stream waits on the receive's event.
  virtual bool OrderAfter(Request /*request*/) { return false; }
  // Posts what the transport holds back until the device has run work (host-staged: the sends
  // whose copies to the host are queued), waiting for the device if need be; nothing for the
  // others. The runtime calls it before a step's read-back, which waits for the device anyway: a
  // peer may be waiting for those sends meanwhile.
  virtual void Flush() {}
  // Step graphs (step_graphs.h). Whether a transfer posted while the device captures its compute
  // stream (DeviceGraphs) is recorded into the capture, to run again at each launch of the graph
  // with no host call: nccl, whose sends and receives are kernels on streams the capture follows;
  // a receive is then a wait on the device. False (mpi, host-staged): the host carries out each
  // transfer, and a step that moves a tensor is not captured.
  virtual bool CapturesTransfers() const { return false; }
  // Around each capture, for a transport that CapturesTransfers: BeginCapture, before the
  // device's capture opens, orders the compute stream after every transfer posted so far (a
  // graph's transfers never overlap earlier ones on the same channel); EndCapture, before it
  // closes, joins into the compute stream the work of every transfer posted in the capture that
  // its consumer did not (sends, receives not ordered by OrderAfter), so the capture can close and
  // the graph ends only once its transfers did. A transfer posted in a capture completes (Test
  // true, Wait returns) only once EndCapture has run; AbandonCapture drops them after a failure.
  virtual void BeginCapture() {}
  virtual void EndCapture() {}
  virtual void AbandonCapture() noexcept {}
  // The stamp of the device's clock (a graph stamp) that records when transfer `request`, posted
  // in a capture, ends at each launch; -1 for a transfer the host carries out (its end is
  // CompletedNs, or when the host saw it).
  virtual int CaptureStamp(Request /*request*/) const { return -1; }
  // How long one of its waits may take (the deadline it was made with).
  virtual std::chrono::nanoseconds deadline() const { return kDefaultWaitDeadline; }
};

inline Transport::Request Transport::Isend(const void* data, int64_t count, ElementType type, int peer, int64_t tag) {
  if (type != ElementType::kF32) {
    throw std::invalid_argument("the " + Name() + " transport moves fp32 only, not " + std::string(ElementTypeName(type)));
  }
  return Isend(static_cast<const float*>(data), count, peer, tag);
}
inline Transport::Request Transport::Irecv(void* data, int64_t count, ElementType type, int peer, int64_t tag) {
  if (type != ElementType::kF32) {
    throw std::invalid_argument("the " + Name() + " transport moves fp32 only, not " + std::string(ElementTypeName(type)));
  }
  return Irecv(static_cast<float*>(data), count, peer, tag);
}

}  // namespace stagecraft::exec
