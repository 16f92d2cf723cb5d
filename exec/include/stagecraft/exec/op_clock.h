// The runtime's clock: the run's start on the device's host clock, and the device stamps taken
// around each compute op, turned into op times only at the few points where the runtime reads
// them back (once per step), so a device that queues its work is never waited on per op.
#pragma once

#include <array>
#include <chrono>
#include <cstdint>
#include <utility>
#include <vector>

#include "stagecraft/exec/device.h"
#include "stagecraft/exec/transport.h"
#include "stagecraft/schedules/ir.h"
#include "stagecraft/schedules/run_record.h"

namespace stagecraft::exec {

// The op indices of `ops` after which the runtime resolves its stamps: for each step, the later
// of its last compute op in `ops` and `also_after[step]` (an op that must have its time by then,
// such as the last stage's STEP that ends the step's report; -1 for none). At most one per step.
std::vector<bool> ResolvePoints(const std::vector<schedules::Op>& ops, int steps, const std::vector<int>& also_after);

class OpClock {
 public:
  // `resolve_after` has one entry per op of the rank's list (ResolvePoints); `deadline` bounds
  // the wait for the device in Resolve (the transport's: Transport::deadline).
  OpClock(Device& device, std::vector<bool> resolve_after, std::chrono::nanoseconds deadline = kDefaultWaitDeadline)
      : device_(device), resolve_after_(std::move(resolve_after)), deadline_ns_(deadline.count()) {}

  // The run starts: the device's queue drained, its stamps cleared, and now taken as time 0.
  void Start() {
    device_.streams().Synchronize();
    device_.clock().ClearStamps();
    start_ns_ = device_.clock().NowNs();
  }
  int64_t start_ns() const { return start_ns_; }
  // The host time now, in ns since the run's start.
  int64_t Now() { return device_.clock().NowNs() - start_ns_; }
  // When a transfer or collective ended, in ns since the run's start: `completed_ns` where its
  // transport timed it on the device (Transport::CompletedNs, on NowNs's clock), else now.
  int64_t Completion(int64_t completed_ns) { return completed_ns >= 0 ? completed_ns - start_ns_ : Now(); }

  // Around a compute op: Begin marks the device's queue before it, End after it, for op `op`.
  int Begin() { return device_.clock().Stamp(); }
  // Returns the end's stamp.
  int End(int op, int begin) {
    const int end = device_.clock().Stamp();
    Push(&timed_, {op, begin, end}, end);
    return end;
  }
  // Op `op` ran inside a launched graph between stamps `begin` and `end` (of that launch's
  // instance: device_graphs.h). `end_elsewhere`: the end was stamped on a stream of the
  // transport's (a transfer recorded into the graph), not in the compute stream's order.
  void Replayed(int op, int begin, int end, bool end_elsewhere = false) {
    if (!end_elsewhere) return Push(&timed_, {op, begin, end}, end);
    Push(&timed_, {op, begin, end}, begin);
    elsewhere_.push_back(end);
  }
  // Transfer op `op`, recorded into a capture, ends at stamp `end`, taken on a stream of the
  // transport's (Transport::CaptureStamp): its end is read from there.
  void EndedAt(int op, int end) {
    ended_.push_back({op, end, end});
    elsewhere_.push_back(end);
  }
  // The same around a copy queued on copy stream `stream` (an OFFLOAD or RELOAD).
  int BeginOn(StreamKind stream) { return device_.clock().StampOn(stream); }
  void EndOn(int op, int begin, StreamKind stream) {
    const int end = device_.clock().StampOn(stream);
    Push(&timed_, {op, begin, end, stream}, end);
  }
  // Marks the device's queue when a transfer or collective op `op` is posted: its start is when
  // the device has run the work queued before it (the producer of what it moves), on the clock
  // compute ops are timed by. A device that runs each call to completion (cpu) reads the host
  // clock here, as a post time.
  // Returns the mark's stamp.
  int Mark(int op) {
    const int mark = device_.clock().Stamp();
    Push(&marked_, {op, mark, -1}, mark);
    return mark;
  }
  // Whether the stamps are read back after op `op` (ResolvePoints).
  bool ResolvesAfter(int op) const { return resolve_after_[static_cast<size_t>(op)]; }
  // Compute ops stamped and not yet resolved.
  size_t pending() const { return timed_.size(); }

  // Turns the stamps taken since the last call into the times of their ops in `record` (ns since
  // the start; what they imply: schedules::FinishRunRecord): a compute op's start and end, a
  // marked op's start, a recorded transfer's end (EndedAt). Then clears them. First waits until the device has reached the latest
  // stamp, polling (DeviceClock::Reached) under the deadline: a device whose queue waits on a peer
  // that never sends (a receive ordered on the device) must not hold the host for good. Throws
  // TimeoutError when the deadline passes first; the caller names what the stamps are of.
  void Resolve(schedules::RankRecord* record);

 private:
  struct TimedOp {
    int op = 0;     // index in the rank's op list
    int start = 0;  // device stamps around it
    int end = 0;
    StreamKind stream = StreamKind::kCompute;  // where they were taken
  };

  // Adds `t` to `list`, `last` being the stamp of it queued last on its stream.
  void Push(std::vector<TimedOp>* list, const TimedOp& t, int last) {
    list->push_back(t);
    last_[static_cast<size_t>(t.stream)] = last;
  }

  Device& device_;
  std::vector<bool> resolve_after_;
  int64_t deadline_ns_;
  std::vector<TimedOp> timed_;   // compute ops run since the last Resolve
  std::vector<TimedOp> marked_;  // transfers and collectives posted since (end unused)
  std::vector<TimedOp> ended_;   // transfers recorded into a graph, by the stamp of their end (start unused)
  std::vector<int> elsewhere_;   // stamps on the transport's streams, each waited for apart
  // By stream, the stamp queued there last since the last Resolve (-1: none); stamp ids do not
  // follow the queue's order once graphs' stamps are among them (device_graphs.h).
  std::array<int, 3> last_{-1, -1, -1};
  int64_t start_ns_ = 0;
};

}  // namespace stagecraft::exec
