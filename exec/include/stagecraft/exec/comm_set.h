// The communicators of one process that are made and ended without blocking (NCCL's
// non-blocking mode: exec/cuda/nccl_comms.h), as plain C++ over the library's calls so that tests
// drive it with fakes: waited for under a deadline, their asynchronous errors checked, every one
// aborted at the first failure of any, and each closed within a bound (finalized while it
// quiesces, else aborted). Header-only: the cuda backend's library (exec_cuda) uses it and must
// not link back into exec. One thread uses a set.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "stagecraft/exec/poll.h"
#include "stagecraft/exec/transport.h"

namespace stagecraft::exec {

// A communicator's state as the library reports it (NCCL: ncclCommGetAsyncError).
enum class CommState {
  kReady,    // nothing in progress: it may be used, or destroyed after a finalize
  kPending,  // its creation, a finalize or an enqueue is still in progress (ncclInProgress)
  kFailed,   // an error: it can only be aborted
};

// The library's calls on one communicator (a handle it gave).
class CommCalls {
 public:
  virtual ~CommCalls() = default;
  // Its state now; `*error` says why when kFailed.
  virtual CommState State(void* comm, std::string* error) = 0;
  // Starts flushing it (ncclCommFinalize): its State is kPending until it is quiescent.
  virtual CommState Finalize(void* comm, std::string* error) = 0;
  // Frees a finalized, quiescent communicator without waiting (ncclCommDestroy).
  virtual void Destroy(void* comm) = 0;
  // Ends it at once, operations in flight included, and frees it (ncclCommAbort).
  virtual void Abort(void* comm) = 0;
};

class CommSet {
 public:
  using Id = int;
  // Waits poll back to back for a short while, then sleep between polls with a backoff (a
  // communicator's creation takes milliseconds to seconds). `now_ns` and `sleep_ns` are the
  // system's unless a test passes its own (poll.h).
  static constexpr PollPolicy kPoll{.deadline_ns = 0, .spin_ns = 50'000, .min_sleep_ns = 20'000,
                                    .max_sleep_ns = 1'000'000};

  explicit CommSet(CommCalls& calls, std::function<int64_t()> now_ns = MonotonicNowNs,
                   std::function<void(int64_t)> sleep_ns = SleepNs)
      : calls_(calls), now_ns_(std::move(now_ns)), sleep_ns_(std::move(sleep_ns)) {}
  CommSet(const CommSet&) = delete;
  CommSet& operator=(const CommSet&) = delete;

  // Holds `comm` from now on; `name` says which it is in messages ("the channel 0 -> 1").
  Id Add(void* comm, std::string name) {
    entries_.emplace(next_, Entry{comm, std::move(name)});
    return next_++;
  }
  // The communicator `id` stands for. Throws std::runtime_error once it was aborted (after a
  // failure, here or in another holder's communicator) and std::logic_error once closed.
  void* Get(Id id) const { return Live(id).comm; }
  bool aborted(Id id) const { return At(id).aborted; }
  // Held and not closed (aborted ones included until closed).
  size_t size() const { return entries_.size(); }

  // Polls `ids` until none is pending, within `deadline_ns`. One that failed, or the deadline
  // passing first, aborts every communicator of the set and throws: std::runtime_error naming
  // the one that failed and its error, or TimeoutError naming those still in progress. `what`
  // says what was waited for ("making the NCCL communicators of rank 1").
  void AwaitReady(const std::vector<Id>& ids, int64_t deadline_ns, const std::string& what) {
    std::vector<Id> pending = ids;
    std::string failed;
    PollPolicy policy = kPoll;
    policy.deadline_ns = deadline_ns;
    const bool done = PollUntil(
        [&] {
          for (size_t j = 0; j < pending.size();) {
            const Entry& e = Live(pending[j]);
            std::string error;
            const CommState state = calls_.State(e.comm, &error);
            if (state == CommState::kFailed) {
              failed = e.name + ": " + error;
              return true;
            }
            if (state == CommState::kReady) {
              pending[j] = pending.back();
              pending.pop_back();
            } else {
              ++j;
            }
          }
          return pending.empty();
        },
        policy, now_ns_, sleep_ns_);
    if (!failed.empty()) Fail(what + ": " + failed);
    if (done) return;
    std::string names;
    for (const Id id : pending) names += (names.empty() ? "" : ", ") + At(id).name;
    AbortAll();
    throw TimeoutError(what + " did not complete within " + SecondsText(deadline_ns) + " (" + names +
                       " still in progress): a peer is hung or gone (" + kAbortedNote + ")");
  }

  // Throws as AwaitReady does when one of `ids` has failed (or was aborted); one still in
  // progress is not waited for.
  void CheckErrors(const std::vector<Id>& ids) {
    for (const Id id : ids) {
      const Entry& e = Live(id);
      std::string error;
      if (calls_.State(e.comm, &error) == CommState::kFailed) Fail(e.name + ": " + error);
    }
  }

  // Aborts every communicator held that is not aborted yet; later Gets of them throw.
  void AbortAll() {
    for (auto& [id, e] : entries_) {
      if (e.aborted) continue;
      e.aborted = true;
      calls_.Abort(e.comm);
    }
  }

  // Ends `ids` within `deadline_ns` and lets them go: each that is ready is finalized, polled
  // until quiescent and destroyed; one that is still in progress, fails, or has not quiesced by
  // the deadline is aborted instead (an aborted one is only let go). Never throws: destructors
  // call it. Returns how many it aborted.
  int Close(const std::vector<Id>& ids, int64_t deadline_ns) noexcept {
    int aborted = 0;
    const auto abort = [&](Id id) {
      Entry& e = entries_.at(id);
      if (!e.aborted) calls_.Abort(e.comm);
      e.aborted = true;
      ++aborted;
      entries_.erase(id);
    };
    try {
      std::vector<Id> finalizing;
      for (const Id id : ids) {
        auto it = entries_.find(id);
        if (it == entries_.end()) continue;
        std::string error;
        if (it->second.aborted) {
          entries_.erase(it);
        } else if (calls_.State(it->second.comm, &error) != CommState::kReady ||
                   calls_.Finalize(it->second.comm, &error) == CommState::kFailed) {
          abort(id);
        } else {
          finalizing.push_back(id);
        }
      }
      PollPolicy policy = kPoll;
      policy.deadline_ns = deadline_ns;
      PollUntil(
          [&] {
            for (size_t j = 0; j < finalizing.size();) {
              const Id id = finalizing[j];
              std::string error;
              const CommState state = calls_.State(entries_.at(id).comm, &error);
              if (state == CommState::kPending) {
                ++j;
                continue;
              }
              if (state == CommState::kReady) {
                calls_.Destroy(entries_.at(id).comm);
                entries_.erase(id);
              } else {
                abort(id);
              }
              finalizing[j] = finalizing.back();
              finalizing.pop_back();
            }
            return finalizing.empty();
          },
          policy, now_ns_, sleep_ns_);
      for (const Id id : finalizing) abort(id);
    } catch (...) {  // a fake's or the clock's exception: what is left is let go as it is
    }
    return aborted;
  }

  // What every failure message ends with.
  static constexpr const char* kAbortedNote = "every NCCL communicator of this rank was aborted";

 private:
  struct Entry {
    void* comm = nullptr;
    std::string name;
    bool aborted = false;
  };

  const Entry& At(Id id) const {
    auto it = entries_.find(id);
    if (it == entries_.end()) throw std::logic_error("CommSet: communicator " + std::to_string(id) + " is closed");
    return it->second;
  }
  const Entry& Live(Id id) const {
    const Entry& e = At(id);
    if (e.aborted) {
      throw std::runtime_error(e.name + " was aborted after a failure (" + std::string(kAbortedNote) + ")");
    }
    return e;
  }
  [[noreturn]] void Fail(const std::string& what) {
    AbortAll();
    throw std::runtime_error(what + " (" + kAbortedNote + ")");
  }

  CommCalls& calls_;
  std::function<int64_t()> now_ns_;
  std::function<void(int64_t)> sleep_ns_;
  std::map<Id, Entry> entries_;
  Id next_ = 0;
};

}  // namespace stagecraft::exec
