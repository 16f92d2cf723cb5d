// The simulator's event loop (see event_loop.h).
#include "stagecraft/sim/event_loop.h"

#include "stagecraft/base/check.h"

namespace stagecraft::sim {

EventId EventLoop::ScheduleAt(int64_t time_ns, EventHandler* handler, int32_t a, int32_t b) {
  SC_CHECK(time_ns >= now_ns_, "an event is scheduled in the past");
  SC_CHECK(handler != nullptr, "an event needs a handler");
  const uint64_t seq = cancelled_.size();
  cancelled_.push_back(false);
  queue_.push(Event{time_ns, seq, handler, a, b});
  return EventId{seq};
}

void EventLoop::Cancel(EventId id) {
  if (id.seq == EventId::kNone) return;
  SC_CHECK(id.seq < cancelled_.size(), "cancelling an event that was never scheduled");
  cancelled_[id.seq] = true;
}

bool EventLoop::IsCancelled(EventId id) const { return id.seq < cancelled_.size() && cancelled_[id.seq]; }

void EventLoop::Run() {
  while (!queue_.empty()) {
    const Event event = queue_.top();
    queue_.pop();
    SC_CHECK(event.time_ns >= now_ns_, "time never goes backwards");
    now_ns_ = event.time_ns;
    ++processed_;
    // One atomic load per kStopCheckEvents events: nothing beside the events themselves.
    if (stop_ != nullptr && processed_ % kStopCheckEvents == 0 && stop_->load(std::memory_order_relaxed)) {
      throw StopRequested{};
    }
    if (!cancelled_[event.seq]) event.handler->OnEvent(event);
  }
}

}  // namespace stagecraft::sim
