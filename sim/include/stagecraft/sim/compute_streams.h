// Compute streams (DESIGN.md §4): each rank runs its compute ops strictly in IR order on one
// stream, and goes past an ALL_TO_ALL only once it has finished (all_to_all.h); an op starts when the stream is free and its input has arrived (a STEP: its
// REDUCE_GRAD has finished). SEND/RECV/REDUCE_GRAD only post and take no stream time; a STEP holds the stream for the stage's step_ns (0: an instant). With a
// calibrated cost table, every op of the list also leaves op_overhead_ns of runtime work on the
// stream, paid before the next compute op starts and after its input is in hand (never hidden
// under a wait: the executor's bubble split measures overhead as the gap after an op's input
// arrived, DESIGN.md §9), and an op whose input came from another rank starts only after the
// receiver's share of that transfer (StreamHooks::InputCopyNs), which ends its RECV.
//
// Ranks that share a device (pipeline.ranks_per_device > 1: `rank_devices` names one device for
// several ranks) time-slice it, in one of two ways (`time_slice_ns`, DeviceSpec::time_slice_ns):
// - 0, processor sharing: the compute ops running on one device at a time split it evenly, so
//   each progresses at 1 / n of its own speed while n run, and its end moves whenever one
//   starts or ends beside it (the limit of a scheduler's slices much shorter than an op);
// - else round-robin turns of that length: the op holding the device runs at full speed until
//   it ends or its turn does, then passes the device to the next op waiting, in the order they
//   came (an operating system's scheduler between processes on a core, its slice as long as an
//   op or longer). An op's recorded start is when it first holds the device, so the time it
//   waited for its turn is a gap before it, as a measured run shows it.
// The runtime's overhead is host work and is not shared.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "stagecraft/schedules/ir.h"
#include "stagecraft/schedules/run_record.h"
#include "stagecraft/sim/cost_table.h"
#include "stagecraft/sim/event_loop.h"

namespace stagecraft::sim {

// How long an op holds its rank's stream: F forward, B backward input + weight, I and W their
// halves, STEP the stage's step (plus the version copy when it cannot update in place, see
// schedules::StepsInPlace), SEND/RECV nothing.
int64_t OpDurationNs(const StageCost& cost, schedules::OpKind kind, bool step_in_place = true);

// What op `index` of `rank` takes of its cost in a run whose ops vary with coefficient of
// variation `cv` (CostTable::op_time_cv): a log-normal draw of mean 1, fixed by seed, rank and
// index; 1 when cv is 0.
double OpTimeFactor(double cv, uint64_t seed, int rank, int index);

// What the streams ask of, and tell, the rest of the simulator. Calls come at the loop's time.
class StreamHooks {
 public:
  // A compute op's data (and what it reads from host memory), a STEP's REDUCE_GRAD.
  virtual bool InputReady(int rank, int index, const schedules::Op& op) = 0;
  virtual int64_t InputCopyNs(int rank, const schedules::Op& op) = 0;         // receiver's copy first
  virtual void Posted(int rank, int index, const schedules::Op& op) = 0;  // a SEND, RECV, REDUCE_GRAD, ALL_TO_ALL, copy
  virtual bool AllToAllDone(int rank, int index) = 0;                     // the ALL_TO_ALL at `index` of `rank`
  // F/B/I/W/STEP; `in_hand_ns`: when its input was there, the receiver's copy included.
  virtual void ComputeStarted(int rank, int index, const schedules::Op& op, int64_t in_hand_ns) = 0;
  virtual void ComputeFinished(int rank, int index, const schedules::Op& op) = 0;  // F/B/I/W/STEP

 protected:
  ~StreamHooks() = default;
};

// Fills the compute and STEP timings of the record (what they imply:
// schedules::FinishRunRecord). A 0 ns STEP starts and finishes on the spot, with no event.
class ComputeStreams final : public EventHandler {
 public:
  // Keeps references to all of its arguments, which must outlive it. `record` has one timing
  // per op of every rank.
  // `rank_devices[r]` is the device of rank r (SimConfig::rank_devices; empty: a device each).
  ComputeStreams(const schedules::Schedule& schedule, const CostTable& costs, EventLoop* loop, StreamHooks* hooks,
                 schedules::RunRecord* record, const std::vector<int>& rank_devices = {}, int64_t time_slice_ns = 0);

  // Runs every rank from its first op, at the loop's current time.
  void Start();
  // The input a stalled rank waits for may have arrived: try its next op again.
  void Wake(int rank);
  bool waiting(int rank) const { return streams_[rank].waiting; }
  // Checks that every rank ran all of its ops (a rank left behind means the schedule deadlocks).
  void CheckAllDone() const;

  void OnEvent(const Event& event) override;  // a compute op or STEP ends

 private:
  struct Stream {
    size_t next = 0;  // index of the next op to run or post
    bool waiting = false;
    int64_t free_ns = 0;  // when the last compute op ended
    int64_t owed_ns = 0;  // the runtime's work since (that op's and the posts'), paid before the next
  };

  // An op running on a shared device: its own time still to do, at full speed.
  struct Running {
    int rank = 0;
    int index = 0;
    double left_ns = 0;
    EventId end;
    bool held = false;  // in turns: has held the device (its recorded start is its first turn)
  };
  // A device several ranks share: the ops running on it, progressed up to since_ns. In turns,
  // running[0] holds the device until turn_end_ns and the others wait in order.
  struct SharedDevice {
    std::vector<Running> running;
    int64_t since_ns = 0;
    int64_t turn_end_ns = 0;  // in turns: when the holder's turn ends, if another op waits by then
    EventId turn;             // in turns: the holder's next stop (its op's end, or its turn's)
  };
  // In turns: the holder of device `event.a` stops (its op ends, or its turn does).
  class Turns final : public EventHandler {
   public:
    explicit Turns(ComputeStreams* streams) : streams_(streams) {}
    void OnEvent(const Event& event) override { streams_->EndTurn(event.a); }

   private:
    ComputeStreams* streams_;
  };
  // Starts an op of `rank` (at the loop's time) on its shared device.
  class Joiner final : public EventHandler {
   public:
    explicit Joiner(ComputeStreams* streams) : streams_(streams) {}
    void OnEvent(const Event& event) override { streams_->Join(event.a, event.b); }

   private:
    ComputeStreams* streams_;
  };

  void Advance(int rank);
  void FinishOp(int rank, int index, const schedules::Op& op);
  void Join(int rank, int index);
  // Charges the time since the device's last change to its running ops, then moves their ends
  // to where the current sharing puts them.
  void Progress(SharedDevice& device);
  void Reschedule(SharedDevice& device);
  // In turns: gives the device to running[0] (a new turn) and schedules its stop.
  void GiveTurn(int device_index);
  // In turns: (re)sets the holder's stop: its op's end, or its turn's when another op waits
  // (Join calls it again when one comes).
  void ScheduleStop(int device_index);
  void EndTurn(int device_index);

  const schedules::Schedule& schedule_;
  const CostTable& costs_;
  EventLoop* loop_;
  StreamHooks* hooks_;
  schedules::RunRecord* record_;
  std::vector<Stream> streams_;  // per rank
  std::vector<std::vector<bool>> steps_in_place_;  // [rank][op index]
  std::vector<std::vector<double>> stash_depths_;  // [rank][op index]; empty without costs_.rank_stash
  // PipeMare's correction (memory_model.h KeepsWeightVelocity): the updates each backward spans
  // (schedules::CorrectionSpans), [rank][op index]; empty without the correction.
  std::vector<std::vector<int>> correction_spans_;
  // Expert parallelism (all_to_all.h): [rank][op index] the compute op whose start posts an
  // ALL_TO_ALL after an overlapped pair (-1: the list posts it), and whether each is posted;
  // empty without ALL_TO_ALLs.
  std::vector<std::vector<int>> paired_;
  std::vector<std::vector<bool>> a2a_posted_;
  // Posts the ALL_TO_ALLs that the start of op `index` of `rank` posts; true when there are any
  // (the pair then runs beside them, at 1 - CostTable::a2a_sm_share of the device).
  bool PostPaired(int rank, int index);
  std::vector<int> shared_of_;            // [rank]: index in shared_, -1 when the rank has its device alone
  std::vector<SharedDevice> shared_;
  int64_t time_slice_ns_ = 0;
  Joiner joiner_{this};
  Turns turns_{this};
};

}  // namespace stagecraft::sim
