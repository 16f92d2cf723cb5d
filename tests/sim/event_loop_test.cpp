// The event loop against hand-worked orders: time order, insertion order at equal times
// (events scheduled while running included), cancel, and no scheduling into the past.
#include "stagecraft/sim/event_loop.h"

#include <atomic>
#include <functional>
#include <tuple>
#include <vector>

#include <gtest/gtest.h>

namespace stagecraft::sim {
namespace {

// Records (time, a) of every event it runs, then runs `then` if set.
class Recorder final : public EventHandler {
 public:
  explicit Recorder(EventLoop* loop) : loop_(loop) {}
  void OnEvent(const Event& event) override {
    seen.emplace_back(loop_->now_ns(), event.a);
    if (then) then(event);
  }
  std::vector<std::tuple<int64_t, int>> seen;
  std::function<void(const Event&)> then;

 private:
  EventLoop* loop_;
};

using Seen = std::vector<std::tuple<int64_t, int>>;

class EventLoopTest : public ::testing::Test {
 protected:
  EventLoop loop;
  Recorder rec{&loop};
};

TEST_F(EventLoopTest, RunsEventsInTimeOrder) {
  loop.ScheduleAt(30, &rec, 3);
  loop.ScheduleAt(10, &rec, 1);
  loop.ScheduleAt(20, &rec, 2);
  loop.Run();
  EXPECT_EQ(rec.seen, (Seen{{10, 1}, {20, 2}, {30, 3}}));
  EXPECT_EQ(loop.now_ns(), 30);
  EXPECT_EQ(loop.events_processed(), 3u);
  EXPECT_TRUE(loop.empty());
}

TEST_F(EventLoopTest, EqualTimesRunInInsertionOrder) {
  loop.ScheduleAt(7, &rec, 0);
  loop.ScheduleAt(5, &rec, 10);
  loop.ScheduleAt(7, &rec, 1);
  loop.ScheduleAt(5, &rec, 11);
  loop.ScheduleAt(7, &rec, 2);
  loop.Run();
  EXPECT_EQ(rec.seen, (Seen{{5, 10}, {5, 11}, {7, 0}, {7, 1}, {7, 2}}));
}

// An event scheduled for "now" while the loop runs goes after those already queued for now.
TEST_F(EventLoopTest, EventScheduledForNowRunsAfterThoseAlreadyQueued) {
  rec.then = [&](const Event& e) {
    if (e.a == 0) loop.ScheduleAt(loop.now_ns(), &rec, 9);
  };
  loop.ScheduleAt(5, &rec, 0);
  loop.ScheduleAt(5, &rec, 1);
  loop.ScheduleAt(6, &rec, 2);
  loop.Run();
  EXPECT_EQ(rec.seen, (Seen{{5, 0}, {5, 1}, {5, 9}, {6, 2}}));
}

// Cancel only marks: the loop still takes the event off the queue (and counts it) but does
// not run it.
TEST_F(EventLoopTest, CancelledEventIsSkippedButCounted) {
  const EventId first = loop.ScheduleAt(10, &rec, 1);
  const EventId second = loop.ScheduleAt(20, &rec, 2);
  loop.Cancel(first);
  EXPECT_TRUE(loop.IsCancelled(first));
  EXPECT_FALSE(loop.IsCancelled(second));
  loop.Run();
  EXPECT_EQ(rec.seen, (Seen{{20, 2}}));
  EXPECT_EQ(loop.events_processed(), 2u);
  EXPECT_EQ(loop.now_ns(), 20);
}

// The transfers' pattern: a rate change at t = 4 cancels the arrival planned for 10 and plans
// one for 6 instead.
TEST_F(EventLoopTest, HandlerCancelsAndReschedules) {
  EventId arrival = loop.ScheduleAt(10, &rec, 1);
  rec.then = [&](const Event& e) {
    if (e.a != 0) return;
    loop.Cancel(arrival);
    arrival = loop.ScheduleAt(6, &rec, 1);
  };
  loop.ScheduleAt(4, &rec, 0);
  loop.Run();
  EXPECT_EQ(rec.seen, (Seen{{4, 0}, {6, 1}}));
  EXPECT_EQ(loop.events_processed(), 3u);
}

TEST_F(EventLoopTest, CancellingNoEventOrOneThatRanDoesNothing) {
  loop.Cancel(EventId{});
  const EventId ran = loop.ScheduleAt(3, &rec, 1);
  loop.Run();
  loop.Cancel(ran);
  loop.ScheduleAt(8, &rec, 2);
  loop.Run();
  EXPECT_EQ(rec.seen, (Seen{{3, 1}, {8, 2}}));
}

using EventLoopDeathTest = EventLoopTest;

TEST_F(EventLoopDeathTest, SchedulingIntoThePastIsABug) {
  rec.then = [&](const Event&) { loop.ScheduleAt(loop.now_ns() - 1, &rec, 1); };
  loop.ScheduleAt(10, &rec, 0);
  EXPECT_DEATH(loop.Run(), "scheduled in the past");
}

// A stop flag is looked at every kStopCheckEvents events: a chain of events that would run for
// ever stops at the first look after the flag is set, and a flag never set changes nothing.
TEST_F(EventLoopTest, AStopFlagEndsTheRunAtItsNextLook) {
  std::atomic<bool> stop{false};
  const uint64_t set_at = 10'000;  // past two looks, before the third
  rec.then = [&](const Event& event) {
    if (loop.events_processed() == set_at) stop = true;
    loop.ScheduleAt(loop.now_ns() + 1, &rec, event.a + 1);
  };
  loop.ScheduleAt(0, &rec, 0);
  loop.StopWhen(&stop);
  EXPECT_THROW(loop.Run(), StopRequested);
  EXPECT_EQ(loop.events_processed(), 3 * EventLoop::kStopCheckEvents);
  EXPECT_EQ(rec.seen.size(), 3 * EventLoop::kStopCheckEvents - 1);  // the last one taken is not run

  EventLoop unstopped;
  Recorder counter{&unstopped};
  std::atomic<bool> never{false};
  counter.then = [&](const Event& event) {
    if (event.a < 9999) unstopped.ScheduleAt(unstopped.now_ns() + 1, &counter, event.a + 1);
  };
  unstopped.ScheduleAt(0, &counter, 0);
  unstopped.StopWhen(&never);
  unstopped.Run();
  EXPECT_EQ(counter.seen.size(), 10'000u);
}

}  // namespace
}  // namespace stagecraft::sim
