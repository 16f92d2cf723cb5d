// The simulator's core (DESIGN.md §4), after ns-3's src/core/model/simulator: events ordered by
// (int64 time in ns, increasing sequence number), so equal times run in the order they were
// scheduled and a run is repeatable. Time never goes backwards; cancelling only marks an event.
#pragma once

#include <atomic>
#include <cstdint>
#include <queue>
#include <vector>

#include "stagecraft/base/stop.h"

namespace stagecraft::sim {

struct Event;

// A model that receives the events it scheduled (compute streams, transfers).
class EventHandler {
 public:
  virtual void OnEvent(const Event& event) = 0;

 protected:
  ~EventHandler() = default;
};

// Names one scheduled event, for Cancel. The default id names none (cancelling it does nothing).
struct EventId {
  static constexpr uint64_t kNone = UINT64_MAX;
  uint64_t seq = kNone;
};

struct Event {
  int64_t time_ns = 0;
  uint64_t seq = 0;                 // order of scheduling, unique per loop: the event's id
  EventHandler* handler = nullptr;  // who runs it
  int32_t a = 0, b = 0;             // the handler's arguments (what they mean is up to it)
};

class EventLoop {
 public:
  int64_t now_ns() const { return now_ns_; }
  // Events taken off the queue so far, cancelled ones included (as ns-3 counts them).
  uint64_t events_processed() const { return processed_; }
  bool empty() const { return queue_.empty(); }

  // Schedules handler->OnEvent at `time_ns`, which must not be in the past.
  EventId ScheduleAt(int64_t time_ns, EventHandler* handler, int32_t a, int32_t b = 0);

  // Marks the event so that the loop skips it. Cancelling one that already ran, or the none
  // id, does nothing.
  void Cancel(EventId id);
  bool IsCancelled(EventId id) const;

  // Runs the earliest event, then the next, until none is left. Handlers may schedule and
  // cancel events while it runs. With a stop flag set (StopWhen), it looks at the flag every
  // kStopCheckEvents events and throws StopRequested (base/stop.h) once it is true.
  void Run();

  // A flag another thread may set to end Run early (a Ctrl-C in the Python module); null: none.
  void StopWhen(const std::atomic<bool>* stop) { stop_ = stop; }
  static constexpr uint64_t kStopCheckEvents = 4096;  // a few hundred microseconds of events

 private:
  struct Later {
    bool operator()(const Event& x, const Event& y) const {
      return x.time_ns != y.time_ns ? x.time_ns > y.time_ns : x.seq > y.seq;
    }
  };

  std::priority_queue<Event, std::vector<Event>, Later> queue_;
  std::vector<bool> cancelled_;  // by seq
  int64_t now_ns_ = 0;
  uint64_t processed_ = 0;
  const std::atomic<bool>* stop_ = nullptr;
};

}  // namespace stagecraft::sim
