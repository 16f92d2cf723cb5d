// The mailbox of one rank's runtime: tensors waiting between their producer and their consumer,
// and the transfers posted for SEND and RECV ops, both keyed by their data edge (edges.h
// EdgeKey, also the transfer's tag); transfers complete by polling or by the consumer's wait.
#pragma once

#include <cstdint>
#include <unordered_map>
#include <vector>

#include "stagecraft/exec/device.h"
#include "stagecraft/exec/op_clock.h"
#include "stagecraft/exec/transport.h"
#include "stagecraft/schedules/edges.h"
#include "stagecraft/schedules/ir.h"
#include "stagecraft/schedules/run_record.h"
#include "stagecraft/schedules/unit_index.h"

namespace stagecraft::exec {

// Whether a SEND comes after op `op` of a rank's list before its next op that is not a transfer
// post: the runtime posts it before any other work (a poll, reading the clock's stamps back).
inline bool SendFollows(const std::vector<schedules::Op>& ops, int op) {
  for (size_t next = static_cast<size_t>(op) + 1; next < ops.size() && schedules::IsComm(ops[next].kind); ++next) {
    if (schedules::IsSend(ops[next].kind)) return true;
  }
  return false;
}

// The routes of `schedule`'s traffic (every rank's SENDs: from the rank to the op's peer), each
// once, ordered by (from, to), all carrying tensors of `boundary_floats`: what a transport
// prepares before the run (Transport::Prepare). Every rank computes the same list.
std::vector<Route> Routes(const schedules::Schedule& schedule, int64_t boundary_floats);

// Each transfer's times on the run's clock, as the times of its SEND or RECV op: either starts
// when the device has run the work queued before its post (OpClock::Mark: a SEND's tensor is
// made, a RECV's buffer free, as a transport on the device's streams orders them; the host's
// post on a device that runs each call to completion), and ends when its transfer completed, on
// the device where the transport times it there (Transport::CompletedNs), else when this rank
// saw it.
//
// A received tensor's consumer waits for it on the device where the transport can order the
// device after the receive (Transport::OrderAfter: nccl): the host hands the buffer over at once
// and the device holds the consumer back, so no GPU idles while the host waits. Such a receive is
// still completed by a later poll, or by FinishReceives before the runtime reads its stamps back
// (the device cannot pass them without it), under the transport's deadline. Elsewhere (mpi,
// host-staged) the host waits for it before handing the buffer over, as before.
class Mailbox {
 public:
  // For `rank`'s op list of `schedule`; a RECV receives `boundary_floats` floats (BoundaryFloats).
  // SEND and RECV times go to `times` (one entry per op of the rank). Keeps references to all.
  Mailbox(const schedules::Schedule& schedule, int rank, Device& device, Transport& transport, OpClock& clock,
          int64_t boundary_floats, std::vector<schedules::OpTiming>* times);

  // A local producer's output under its edge, until a SEND posts it or a local consumer takes it.
  void Put(const schedules::Edge& edge, Buffer tensor) { waiting_[Key(edge)] = std::move(tensor); }
  // Posts op `op` of the rank, a SEND (of the tensor Put under `edge`) or a RECV of `edge`.
  // Returns the stamps of its start (OpClock::Mark) and, for a transfer the transport recorded
  // into an open capture (Transport::CaptureStamp), of its end; else -1.
  struct Stamps {
    int start = -1;
    int end = -1;
  };
  Stamps Post(int op, const schedules::Edge& edge);
  // The tensor of `edge` for its consumer: produced on this rank, or received (the device
  // ordered after the receive where the transport can, else waiting for it unless a poll saw it
  // complete). Throws TimeoutError naming the RECV op on a wait past the transport's deadline.
  Buffer Take(const schedules::Edge& edge);

  // After op `op`: polls the transfers unless a SEND comes before the next op that is not a
  // transfer. A SEND behind its producer (with only other posts between, as an interleaved
  // order puts a RECV there) is posted first: a poll can finish a receive (its copy takes tens
  // of microseconds), and the peer waiting for this tensor would wait that much longer. The
  // poll then follows the SEND.
  void AfterOp(int op) {
    if (!SendFollows(ops_, op)) Poll();
  }
  // Notes the transfers that completed (their end time) and frees the buffers of finished sends.
  void Poll();
  // Waits for every receive handed to its consumer before it completed (OrderAfter), and notes
  // its end: the device cannot reach work queued after those consumers without them. Throws
  // TimeoutError naming the RECV op on a wait past the transport's deadline.
  void FinishReceives();
  // Completes every send recorded into a capture that has closed (no wait: the graph's own
  // launch carries it out), so that its end joins the stamps read next.
  void FinishCaptured();
  // At the end of the run: waits for every send still in flight, and every receive as above.
  void FinishSends();

  // Nothing waits for a consumer and no receive is posted or pending.
  bool empty() const { return waiting_.empty() && recvs_.empty() && ordered_.empty(); }
  size_t sends_in_flight() const { return sends_.size(); }
  // Receives handed to their consumer, not yet seen complete.
  size_t receives_ordered() const { return ordered_.size(); }

 private:
  struct Pending {
    Transport::Request request = 0;
    Buffer buffer;
    int op = 0;          // index in the rank's op list
    bool done = false;   // a poll saw it complete (its handle is released)
    int end_stamp = -1;  // recorded into a capture: the stamp of its end (Transport::CaptureStamp)
  };

  int64_t Key(const schedules::Edge& edge) const { return static_cast<int64_t>(schedules::EdgeKey(units_, edge)); }
  // Waits for a transfer unless a poll saw it complete; a wait past the deadline names its op.
  void Finish(Pending& p);
  // A transfer's end: its stamp where it was recorded into a capture; when the transport saw it
  // complete on the device; else now.
  void Complete(Pending& p) {
    p.done = true;
    if (p.end_stamp >= 0) return clock_.EndedAt(p.op, p.end_stamp);
    (*times_)[p.op].end_ns = clock_.Completion(transport_.CompletedNs());
  }

  const std::vector<schedules::Op>& ops_;
  const int microbatches_;
  const schedules::UnitIndex units_;
  Device& device_;
  Transport& transport_;
  OpClock& clock_;
  const int64_t boundary_floats_;
  std::vector<schedules::OpTiming>* times_;
  std::unordered_map<int64_t, Buffer> waiting_;  // by edge key
  std::vector<Pending> sends_;                   // in flight
  std::unordered_map<int64_t, Pending> recvs_;   // by edge key, until their consumer takes them
  std::vector<Pending> ordered_;                 // taken by the device's order (no buffer), in flight
};

}  // namespace stagecraft::exec
