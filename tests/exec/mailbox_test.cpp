// The runtime's mailbox (exec/src/mailbox.cpp) on the cpu device and a fake transport: local
// tensors, posts with their edge's key and peer, completion by poll or wait, SEND/RECV times,
// the posting rule (a SEND right behind its producer goes before the poll), a timeout's name;
// on a device that queues its work (queued_device.h), transfers timed where they ran; receives
// whose consumer the transport orders on the device (OrderAfter) handed over without a wait and
// completed later; and the routes a schedule's transfers take (Routes), worked by hand.
#include <gtest/gtest.h>

#include <algorithm>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "../schedules/generator_cases.h"
#include "fake_transport.h"
#include "queued_device.h"
#include "stagecraft/exec/cpu_device.h"
#include "stagecraft/exec/mailbox.h"
#include "stagecraft/schedules/edges.h"
#include "stagecraft/schedules/generators.h"
#include "stagecraft/schedules/lower.h"

namespace stagecraft::exec {
namespace {

using schedules::Edge;
using schedules::Op;
using schedules::OpKind;

constexpr int64_t kBoundary = 12;

schedules::Schedule Generated(const std::string& name, int ranks, int chunks, int microbatches) {
  return schedules::Lower(schedules::Generate(name, schedules::test_cases::Params(ranks, microbatches, 1, chunks)));
}

schedules::Schedule TwoRanks() { return Generated("1f1b", 2, 1, 2); }

// A mailbox of rank `rank` of a 2-rank 1F1B, with everything it needs.
struct Fixture {
  explicit Fixture(int rank, schedules::Schedule s = TwoRanks(), std::unique_ptr<Device> d = MakeCpuDevice())
      : device(std::move(d)),
        schedule(std::move(s)),
        ops(schedule.ops[rank]),
        transport(rank, 2),
        mailbox(schedule, rank, *device, transport, clock, kBoundary, &times) {
    clock.Start();
  }
  // The index of the first op of `kind` on the rank.
  int First(OpKind kind) const {
    const auto it = std::find_if(ops.begin(), ops.end(), [&](const Op& op) { return op.kind == kind; });
    EXPECT_NE(it, ops.end());
    return static_cast<int>(it - ops.begin());
  }
  Edge EdgeOf(int i) const { return *schedules::CommEdge(schedule.shape, ops[i]); }
  // Posts the rank's first op of `kind` (a RECV); returns its op index.
  int PostFirst(OpKind kind) {
    const int i = First(kind);
    mailbox.Post(i, EdgeOf(i));
    return i;
  }
  Buffer Filled(float value) {
    Buffer b(*device, kBoundary);
    device->memory().Fill(b.data(), value, b.size());
    return b;
  }

  std::unique_ptr<Device> device;
  schedules::Schedule schedule;
  const std::vector<Op>& ops;
  testing::FakeTransport transport;
  OpClock clock{*device, std::vector<bool>(schedule.ops[transport.rank()].size(), false)};
  schedules::RankRecord record = testing::EmptyRecord(ops.size());
  std::vector<schedules::OpTiming>& times = record.ops;
  Mailbox mailbox;
};

TEST(Mailbox, ALocalTensorWaitsForItsConsumer) {
  Fixture f(0);
  const Edge edge = *schedules::EdgeFrom(f.schedule.shape, schedules::Flow::kActivation, 0, 0, 1);
  Buffer b = f.Filled(2.0f);
  const float* data = b.data();
  f.mailbox.Put(edge, std::move(b));
  EXPECT_FALSE(f.mailbox.empty());
  const Buffer taken = f.mailbox.Take(edge);
  EXPECT_EQ(taken.data(), data);
  EXPECT_TRUE(f.mailbox.empty());
  EXPECT_TRUE(f.transport.posted.empty());
}

TEST(Mailbox, ASendGoesToItsPeerUnderItsEdgeKeyAndIsFreedOnceComplete) {
  Fixture f(0);
  const int i = f.First(OpKind::kSendF);
  const Edge edge = f.EdgeOf(i);
  f.mailbox.Put(edge, f.Filled(1.0f));
  const int64_t held = f.device->memory().bytes_in_use();
  f.mailbox.Post(i, edge);
  ASSERT_EQ(f.transport.posted.size(), 1u);
  const testing::FakeTransport::Posted& sent = f.transport.posted[0];
  EXPECT_TRUE(sent.send);
  EXPECT_EQ(sent.peer, 1);
  EXPECT_EQ(sent.count, kBoundary);
  EXPECT_EQ(sent.tag, static_cast<int64_t>(schedules::EdgeKey(schedules::UnitIndex(f.schedule), edge)));
  EXPECT_LT(f.times[i].start_ns, 0) << "a SEND's start is a device stamp, read when the clock resolves";
  EXPECT_LT(f.times[i].end_ns, 0);

  f.mailbox.Poll();  // not complete yet: the buffer stays
  EXPECT_EQ(f.mailbox.sends_in_flight(), 1u);
  EXPECT_LT(f.times[i].end_ns, 0);
  EXPECT_EQ(f.device->memory().bytes_in_use(), held);
  f.transport.Complete(0);
  f.mailbox.Poll();
  EXPECT_EQ(f.mailbox.sends_in_flight(), 0u);
  f.clock.Resolve(&f.record);
  EXPECT_GE(f.times[i].start_ns, 0);
  EXPECT_GE(f.times[i].end_ns, f.times[i].start_ns);
  EXPECT_EQ(f.device->memory().bytes_in_use(), held - kBoundary * static_cast<int64_t>(sizeof(float)));
  EXPECT_EQ(f.transport.waits, 0);
}

TEST(Mailbox, OnTheCpuASendStartsWhenTheHostPostsIt) {
  // The cpu device runs each call to completion: its stamp at the post is the host's clock
  // then, as before transfers were stamped on the device (the cpu backend's times unchanged).
  Fixture f(0);
  const int i = f.First(OpKind::kSendF);
  f.mailbox.Put(f.EdgeOf(i), f.Filled(1.0f));
  const int64_t before = f.clock.Now();
  f.mailbox.Post(i, f.EdgeOf(i));
  const int64_t after = f.clock.Now();
  f.transport.Complete(0);
  f.mailbox.Poll();
  const int64_t seen = f.clock.Now();
  f.clock.Resolve(&f.record);
  EXPECT_GE(f.times[i].start_ns, before);
  EXPECT_LE(f.times[i].start_ns, after);
  EXPECT_GE(f.times[i].end_ns, after) << "no device time from the transport: the host saw it complete";
  EXPECT_LE(f.times[i].end_ns, seen);
}

TEST(Mailbox, OnAQueuedDeviceASendStartsWhenItsTensorIsMadeAndEndsWhereItRan) {
  auto owned = std::make_unique<testing::QueuedDevice>();
  testing::QueuedDevice& gpu = *owned;
  Fixture f(0, TwoRanks(), std::move(owned));  // the clock starts at host time 0
  const int i = f.First(OpKind::kSendF);
  f.mailbox.Put(f.EdgeOf(i), f.Filled(1.0f));
  // The host posts at 100 µs; the device finishes the forward that makes the tensor at 700.
  gpu.host_ns = 100'000;
  gpu.queue_ns = 700'000;
  f.mailbox.Post(i, f.EdgeOf(i));
  // The transfer ends on the device at 900; the host's poll sees it at 1,300.
  gpu.host_ns = 1'300'000;
  f.transport.completed_ns = 900'000;
  f.transport.Complete(0);
  f.mailbox.Poll();
  f.clock.Resolve(&f.record);
  EXPECT_EQ(f.times[i].start_ns, 700'000) << "waiting for the producer is not the transfer";
  EXPECT_EQ(f.times[i].end_ns, 900'000) << "polling late is not the transfer";
}

TEST(Mailbox, OnAQueuedDeviceAReceiveStartsWhenTheDeviceReachesItsPostAndEndsWhereItRan) {
  auto owned = std::make_unique<testing::QueuedDevice>();
  testing::QueuedDevice& gpu = *owned;
  Fixture f(1, TwoRanks(), std::move(owned));
  gpu.host_ns = 50'000;
  gpu.queue_ns = 400'000;  // the host posts at 50 µs; the device reaches the post at 400
  const int i = f.PostFirst(OpKind::kRecvF);
  gpu.host_ns = 2'000'000;
  f.transport.completed_ns = 650'000;
  const Buffer got = f.mailbox.Take(f.EdgeOf(i));
  f.clock.Resolve(&f.record);
  EXPECT_EQ(f.transport.waits, 1);
  EXPECT_EQ(f.times[i].start_ns, 400'000);
  EXPECT_EQ(f.times[i].end_ns, 650'000);
}

TEST(Mailbox, FinishSendsWaitsForEverySendInFlight) {
  Fixture f(0);
  int posted = 0;
  for (int i = 0; i < static_cast<int>(f.ops.size()); ++i) {
    if (f.ops[i].kind != OpKind::kSendF) continue;
    f.mailbox.Put(f.EdgeOf(i), f.Filled(1.0f));
    f.mailbox.Post(i, f.EdgeOf(i));
    ++posted;
  }
  ASSERT_EQ(posted, 2);
  f.mailbox.FinishSends();
  EXPECT_EQ(f.transport.waits, 2);
  EXPECT_EQ(f.mailbox.sends_in_flight(), 0u);
  for (const auto& p : f.transport.posted) EXPECT_TRUE(p.complete);
}

TEST(Mailbox, AReceiveAPollSawCompleteIsNotWaitedFor) {
  Fixture f(0);
  const int i = f.PostFirst(OpKind::kRecvB);
  const Edge edge = f.EdgeOf(i);
  ASSERT_EQ(f.transport.posted.size(), 1u);
  EXPECT_FALSE(f.transport.posted[0].send);
  EXPECT_EQ(f.transport.posted[0].peer, 1);
  EXPECT_EQ(f.transport.posted[0].count, kBoundary);
  f.transport.Complete(0, 3.0f);
  f.mailbox.Poll();
  f.clock.Resolve(&f.record);
  EXPECT_GE(f.times[i].start_ns, 0);
  EXPECT_GE(f.times[i].end_ns, f.times[i].start_ns);
  const int64_t seen = f.times[i].end_ns;
  const Buffer got = f.mailbox.Take(edge);
  EXPECT_EQ(f.transport.waits, 0);
  EXPECT_EQ(f.times[i].end_ns, seen);  // its completion is when the poll saw it
  ASSERT_EQ(got.size(), kBoundary);
  EXPECT_EQ(got.data()[0], 3.0f);
  EXPECT_EQ(got.data()[kBoundary - 1], 3.0f);
  EXPECT_TRUE(f.mailbox.empty());
}

TEST(Mailbox, AReceiveStillInFlightIsWaitedForByItsConsumer) {
  Fixture f(1);
  const int i = f.PostFirst(OpKind::kRecvF);
  EXPECT_FALSE(f.mailbox.empty());
  f.mailbox.Poll();
  EXPECT_LT(f.times[i].end_ns, 0);
  const Buffer got = f.mailbox.Take(f.EdgeOf(i));
  EXPECT_EQ(f.transport.waits, 1);
  f.clock.Resolve(&f.record);
  EXPECT_GE(f.times[i].start_ns, 0);
  EXPECT_GE(f.times[i].end_ns, f.times[i].start_ns);
  EXPECT_EQ(got.data()[0], 1.0f);
  EXPECT_TRUE(f.mailbox.empty());
}

TEST(Mailbox, AWaitPastTheDeadlineNamesItsOp) {
  Fixture f(0);
  const int i = f.PostFirst(OpKind::kRecvB);
  f.transport.wait_times_out = true;
  try {
    f.mailbox.Take(f.EdgeOf(i));
    FAIL() << "the wait timed out";
  } catch (const TimeoutError& e) {
    EXPECT_EQ(std::string(e.what()).rfind("0RECV_B0 (step 0) from rank 1 timed out: ", 0), 0u) << e.what();
  }
}

TEST(Mailbox, ASendRightBehindItsProducerIsPostedBeforeThePoll) {
  Fixture f(0);
  // A receive in flight, so that every poll tests it.
  f.PostFirst(OpKind::kRecvB);
  const int send = f.First(OpKind::kSendF);
  ASSERT_GT(send, 0);
  ASSERT_EQ(f.ops[send - 1].kind, OpKind::kF);
  f.mailbox.AfterOp(send - 1);  // the producer: its SEND comes next, no poll yet
  EXPECT_EQ(f.transport.tests, 0);
  f.mailbox.AfterOp(send);  // the SEND, followed by no SEND: poll
  EXPECT_EQ(f.transport.tests, 1);
  f.mailbox.AfterOp(static_cast<int>(f.ops.size()) - 1);  // the last op polls
  EXPECT_EQ(f.transport.tests, 2);
}

// Interleaved 1F1B lowered with receives posted ahead puts a RECV post between a producer and its SEND (rank 1: F of
// stage 1, RECV_F of a later microbatch, SEND_F): the SEND still goes before the poll.
TEST(Mailbox, ASendBehindItsProducerAndOtherPostsIsPostedBeforeThePoll) {
  schedules::GeneratorParams p;
  p.ranks = 2;
  p.microbatches = 4;
  p.chunks = 2;
  Fixture f(1, schedules::Lower(schedules::Generate("interleaved", p), schedules::P2p::kAhead));
  f.PostFirst(OpKind::kRecvB);  // a receive in flight, so that every poll tests it
  int producer = -1;
  for (int i = 0; i + 2 < static_cast<int>(f.ops.size()); ++i) {
    if (schedules::IsCompute(f.ops[i].kind) && !schedules::IsSend(f.ops[i + 1].kind) &&
        schedules::IsComm(f.ops[i + 1].kind) && schedules::IsSend(f.ops[i + 2].kind)) {
      producer = i;
      break;
    }
  }
  ASSERT_GE(producer, 0) << "the order has a post between a producer and its SEND";
  f.mailbox.AfterOp(producer);  // a SEND comes before the next compute: no poll yet
  f.mailbox.AfterOp(producer + 1);  // the RECV post, the SEND next: no poll
  EXPECT_EQ(f.transport.tests, 0);
  f.mailbox.AfterOp(producer + 2);  // the SEND posted (its tensor Put by no one here): poll
  EXPECT_EQ(f.transport.tests, 1);
}

// A transport that orders the device after a receive (nccl): the consumer gets the buffer at
// once, with no host wait; the receive stays in flight until a poll sees it or FinishReceives
// waits for it, and its end is still the device's time of it.
TEST(Mailbox, AReceiveTheDeviceIsOrderedAfterIsHandedOverWithoutAWait) {
  auto owned = std::make_unique<testing::QueuedDevice>();
  testing::QueuedDevice& gpu = *owned;
  Fixture f(1, TwoRanks(), std::move(owned));
  f.transport.orders_on_device = true;
  gpu.host_ns = 40'000;
  gpu.queue_ns = 120'000;  // the device reaches the post at 120 µs
  const int i = f.PostFirst(OpKind::kRecvF);
  float* const landing = f.transport.posted.at(0).recv_data;
  const Buffer got = f.mailbox.Take(f.EdgeOf(i));
  EXPECT_EQ(got.data(), landing) << "the consumer reads the receive's own buffer";
  EXPECT_EQ(f.transport.waits, 0) << "the host does not wait";
  EXPECT_EQ(f.transport.ordered, (std::vector<Transport::Request>{0}));
  EXPECT_EQ(f.mailbox.receives_ordered(), 1u);
  EXPECT_FALSE(f.mailbox.empty());
  EXPECT_LT(f.times[i].end_ns, 0) << "not complete yet";
  gpu.host_ns = 9'000'000;
  f.transport.completed_ns = 300'000;  // where it landed on the device
  f.mailbox.FinishReceives();
  f.clock.Resolve(&f.record);
  EXPECT_EQ(f.transport.waits, 1);
  EXPECT_EQ(f.times[i].start_ns, 120'000);
  EXPECT_EQ(f.times[i].end_ns, 300'000);
  EXPECT_EQ(f.mailbox.receives_ordered(), 0u);
  EXPECT_TRUE(f.mailbox.empty());
}

TEST(Mailbox, AReceiveTheDeviceIsOrderedAfterIsCompletedByAPoll) {
  Fixture f(1);
  f.transport.orders_on_device = true;
  const int i = f.PostFirst(OpKind::kRecvF);
  const Buffer got = f.mailbox.Take(f.EdgeOf(i));
  f.mailbox.Poll();
  EXPECT_EQ(f.mailbox.receives_ordered(), 1u);
  f.transport.Complete(0);
  f.mailbox.Poll();
  EXPECT_EQ(f.mailbox.receives_ordered(), 0u);
  f.clock.Resolve(&f.record);
  EXPECT_GE(f.times[i].start_ns, 0);
  EXPECT_GE(f.times[i].end_ns, f.times[i].start_ns);
  f.mailbox.FinishSends();  // nothing left to wait for
  EXPECT_EQ(f.transport.waits, 0);
  EXPECT_TRUE(f.mailbox.empty());
}

// A receive already seen complete is handed over as before, without asking the device to wait.
TEST(Mailbox, AReceiveAlreadyCompleteIsNotOrderedAgain) {
  Fixture f(1);
  f.transport.orders_on_device = true;
  const int i = f.PostFirst(OpKind::kRecvF);
  f.transport.Complete(0);
  f.mailbox.Poll();
  const Buffer got = f.mailbox.Take(f.EdgeOf(i));
  EXPECT_TRUE(f.transport.ordered.empty());
  EXPECT_TRUE(f.mailbox.empty());
}

// The end of a run waits for the ordered receives too, and a wait past the deadline names the
// RECV op, as the host's own wait does.
TEST(Mailbox, FinishingAnOrderedReceivePastTheDeadlineNamesItsOp) {
  Fixture f(0);
  f.transport.orders_on_device = true;
  const int i = f.PostFirst(OpKind::kRecvB);
  const Buffer got = f.mailbox.Take(f.EdgeOf(i));
  EXPECT_EQ(f.transport.waits, 0);
  f.transport.wait_times_out = true;
  try {
    f.mailbox.FinishSends();
    FAIL() << "the wait timed out";
  } catch (const TimeoutError& e) {
    EXPECT_EQ(std::string(e.what()).rfind("0RECV_B0 (step 0) from rank 1 timed out: ", 0), 0u) << e.what();
  }
}

// By hand: 1F1B on 3 ranks sends between neighbours only (no wrap-around); interleaving on 3
// ranks (stage s on rank s mod 3) sends stage 2's output from rank 2 to rank 0 and its gradient
// back; the V placement on 2 ranks turns at rank 1 and comes back, between 0 and 1 only; one
// rank sends nothing.
TEST(Routes, AreTheDirectionsTheSchedulesSendsTake) {
  const auto route = [](int from, int to) { return Route{from, to, kBoundary}; };
  EXPECT_EQ(Routes(Generated("1f1b", 3, 1, 3), kBoundary),
            (std::vector<Route>{route(0, 1), route(1, 0), route(1, 2), route(2, 1)}));
  EXPECT_EQ(Routes(Generated("interleaved", 3, 2, 3), kBoundary),
            (std::vector<Route>{route(0, 1), route(0, 2), route(1, 0), route(1, 2), route(2, 0), route(2, 1)}));
  EXPECT_EQ(Routes(Generated("zb-v", 2, 2, 2), kBoundary), (std::vector<Route>{route(0, 1), route(1, 0)}));
  EXPECT_TRUE(Routes(Generated("gpipe", 1, 1, 2), kBoundary).empty());
}

}  // namespace
}  // namespace stagecraft::exec
