// The communicators' life without blocking (exec/include/stagecraft/exec/comm_set.h) on fake
// library calls and a fake clock: made and waited for under a deadline, a failure or the
// deadline aborting every communicator of the process (another holder's too), and a close that
// finalizes what quiesces and aborts what does not, within its bound.
#include <gtest/gtest.h>

#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

#include "stagecraft/exec/comm_set.h"

namespace stagecraft::exec {
namespace {

// One communicator as the fake library holds it. Polls count State calls.
struct FakeComm {
  int ready_after = 0;      // State says pending this many times, then ready; -1: pending for good
  bool fails = false;       // State says failed
  int quiesce_after = 0;    // after Finalize: pending this many polls, then ready; -1: never
  bool fails_finalize = false;
  int polls = 0;
  bool finalized = false;
  int aborts = 0;
  bool destroyed = false;
};

class FakeCalls final : public CommCalls {
 public:
  CommState State(void* comm, std::string* error) override {
    FakeComm& c = *static_cast<FakeComm*>(comm);
    ++c.polls;
    if (c.fails) {
      *error = "remote process exited";
      return CommState::kFailed;
    }
    int& left = c.finalized ? c.quiesce_after : c.ready_after;
    if (left < 0) return CommState::kPending;
    if (left > 0) {
      --left;
      return CommState::kPending;
    }
    return CommState::kReady;
  }
  CommState Finalize(void* comm, std::string* error) override {
    FakeComm& c = *static_cast<FakeComm*>(comm);
    c.finalized = true;
    if (c.fails_finalize) {
      *error = "finalize failed";
      return CommState::kFailed;
    }
    return CommState::kPending;
  }
  void Destroy(void* comm) override { static_cast<FakeComm*>(comm)->destroyed = true; }
  void Abort(void* comm) override { ++static_cast<FakeComm*>(comm)->aborts; }
};

// Each reading of the clock advances it by 10 µs; a sleep by its length.
struct FakeClock {
  int64_t now = 0;
  std::function<int64_t()> Now() {
    return [this] { return now += 10'000; };
  }
  std::function<void(int64_t)> Sleep() {
    return [this](int64_t ns) { now += ns; };
  }
};

constexpr int64_t kDeadline = 2'000'000'000;  // 2 s

TEST(CommSet, AwaitReadyReturnsOnceEveryCommunicatorIsReady) {
  FakeCalls calls;
  FakeClock clock;
  CommSet set(calls, clock.Now(), clock.Sleep());
  FakeComm a{.ready_after = 3}, b{.ready_after = 7};
  const CommSet::Id ia = set.Add(&a, "the channel 0 -> 1"), ib = set.Add(&b, "the channel 1 -> 0");
  set.AwaitReady({ia, ib}, kDeadline, "making the channels");
  EXPECT_EQ(a.polls, 4);  // 3 pending, then ready and no longer asked
  EXPECT_EQ(b.polls, 8);
  EXPECT_EQ(a.aborts + b.aborts, 0);
  EXPECT_EQ(set.Get(ia), &a);
  EXPECT_LT(clock.now, kDeadline);
}

TEST(CommSet, AFailureAbortsEveryCommunicatorOfTheProcessAndNamesTheOne) {
  FakeCalls calls;
  FakeClock clock;
  CommSet set(calls, clock.Now(), clock.Sleep());
  FakeComm channel{.ready_after = 0}, broken{.ready_after = 2, .fails = true}, replicas{.ready_after = 0};
  const CommSet::Id ic = set.Add(&channel, "the channel 0 -> 1");
  const CommSet::Id ib = set.Add(&broken, "the channel 1 -> 0");
  const CommSet::Id ir = set.Add(&replicas, "the replicas' communicator");  // another holder's
  try {
    set.AwaitReady({ic, ib}, kDeadline, "making the channels");
    FAIL() << "returned";
  } catch (const TimeoutError& e) {
    FAIL() << "a failure is not a timeout: " << e.what();
  } catch (const std::runtime_error& e) {
    EXPECT_EQ(std::string(e.what()),
              "making the channels: the channel 1 -> 0: remote process exited (every NCCL communicator of this rank "
              "was aborted)");
  }
  EXPECT_EQ(channel.aborts, 1);
  EXPECT_EQ(broken.aborts, 1);
  EXPECT_EQ(replicas.aborts, 1) << "the replicas' communicator is aborted with the channels";
  EXPECT_THROW(set.Get(ir), std::runtime_error);
  // Aborted once: a later abort or close does not abort again, nor finalize or destroy.
  set.AbortAll();
  EXPECT_EQ(set.Close({ic, ib, ir}, kDeadline), 0);
  EXPECT_EQ(channel.aborts + broken.aborts + replicas.aborts, 3);
  EXPECT_FALSE(channel.finalized || channel.destroyed || replicas.destroyed);
  EXPECT_EQ(set.size(), 0u);
}

TEST(CommSet, APeerThatNeverComesEndsTheWaitAtTheDeadline) {
  FakeCalls calls;
  FakeClock clock;
  CommSet set(calls, clock.Now(), clock.Sleep());
  FakeComm done{.ready_after = 0}, hung{.ready_after = -1};
  const CommSet::Id id = set.Add(&done, "the channel 0 -> 1"), ih = set.Add(&hung, "the channel 2 -> 1");
  try {
    set.AwaitReady({id, ih}, kDeadline, "making the NCCL communicators of rank 1");
    FAIL() << "returned";
  } catch (const TimeoutError& e) {
    EXPECT_EQ(std::string(e.what()),
              "making the NCCL communicators of rank 1 did not complete within 2 s (the channel 2 -> 1 still in "
              "progress): a peer is hung or gone (every NCCL communicator of this rank was aborted)");
  }
  // Past the deadline by at most one sleep (the backoff's longest, 1 ms) and one reading.
  EXPECT_GT(clock.now, kDeadline);
  EXPECT_LE(clock.now, kDeadline + CommSet::kPoll.max_sleep_ns + 20'000);
  EXPECT_EQ(done.aborts, 1);
  EXPECT_EQ(hung.aborts, 1);
}

TEST(CommSet, CheckErrorsWaitsForNothingAndThrowsOnAFailure) {
  FakeCalls calls;
  CommSet set(calls);
  FakeComm busy{.ready_after = -1}, other{};
  const CommSet::Id ib = set.Add(&busy, "the channel 0 -> 1");
  set.Add(&other, "the replicas' communicator");
  set.CheckErrors({ib});  // in progress is not an error
  EXPECT_EQ(busy.polls, 1);
  busy.fails = true;
  EXPECT_THROW(set.CheckErrors({ib}), std::runtime_error);
  EXPECT_EQ(other.aborts, 1);
}

TEST(CommSet, CloseFinalizesWhatQuiescesAndAbortsWhatDoesNotWithinItsBound) {
  FakeCalls calls;
  FakeClock clock;
  CommSet set(calls, clock.Now(), clock.Sleep());
  FakeComm quiet{.quiesce_after = 5}, stuck{.quiesce_after = -1}, creating{.ready_after = -1},
      refuses{.fails_finalize = true};
  const std::vector<CommSet::Id> ids = {set.Add(&quiet, "a"), set.Add(&stuck, "b"), set.Add(&creating, "c"),
                                        set.Add(&refuses, "d")};
  const int64_t bound = 500'000'000;
  EXPECT_EQ(set.Close(ids, bound), 3);
  EXPECT_TRUE(quiet.finalized && quiet.destroyed);
  EXPECT_EQ(quiet.aborts, 0);
  EXPECT_TRUE(stuck.finalized);
  EXPECT_FALSE(stuck.destroyed);
  EXPECT_EQ(stuck.aborts, 1) << "not quiescent by the bound: aborted";
  EXPECT_FALSE(creating.finalized) << "one still being made is not finalized (NCCL would wait for it)";
  EXPECT_EQ(creating.aborts, 1);
  EXPECT_EQ(refuses.aborts, 1);
  EXPECT_EQ(set.size(), 0u);
  EXPECT_LE(clock.now, bound + CommSet::kPoll.max_sleep_ns + 20'000);
  EXPECT_THROW(set.Get(ids[0]), std::logic_error);
}

TEST(CommSet, CloseNeverThrows) {
  class Throwing final : public CommCalls {
   public:
    CommState State(void*, std::string*) override { throw std::runtime_error("driver gone"); }
    CommState Finalize(void*, std::string*) override { return CommState::kPending; }
    void Destroy(void*) override {}
    void Abort(void*) override {}
  } calls;
  CommSet set(calls);
  FakeComm c;
  EXPECT_NO_THROW(set.Close({set.Add(&c, "a")}, kDeadline));
}

}  // namespace
}  // namespace stagecraft::exec
